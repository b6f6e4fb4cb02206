/** What the routes share with the server that owns them: one context per sandbox. */
import type { SandboxFaults } from './faults.js';
import type { JobStore } from './jobs.js';
import type { ResponseEnv } from './respond.js';
import type { StylesShape } from './style-catalogue.js';
import type { SandboxStats } from './types.js';

/** The sandbox as its routes see it. Functions stand for values that change while it runs. */
export interface SandboxContext extends ResponseEnv {
  /** The current fault knobs (`setFaults` replaces the object, so read it per request). */
  faults(): SandboxFaults;
  /** The seeded PRNG behind every fault roll and the job jitter. */
  rng: () => number;
  /** Whether a fault with this probability strikes; see `roll` in `faults.ts`. */
  roll(probability: number): boolean;
  /** Live statistics, mutated in place. */
  stats: SandboxStats;
  jobs: JobStore;
  /** The key required, or null when any Bearer token is accepted. */
  apiKey: string | null;
  stylesShape: StylesShape;
  /** Takes a rate-limit token: 0 when one was free (or there is no limit), else ms until one is. */
  rateLimitWait(now: number): number;
  /** Base URL of the service origin, without a trailing slash. */
  url(): string;
  /** Base URL of the second origin, the target of the `redirect-cross-origin` result fault. */
  secondaryUrl(): string;
}
