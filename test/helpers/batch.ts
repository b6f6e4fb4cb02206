import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RunEvent } from '../../src/pipeline/events.js';
import { type RunOptions, type RunResult, runBatch } from '../../src/pipeline/run.js';
import { type Sandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/index.js';
import type { Report } from '../../src/types.js';
import { type KitchenLook, kitchenJpeg } from '../support/images.js';
import { canaryKey, QUICK_JOBS } from './sandbox.js';
import { tempDir } from './tmp.js';

/** A throwaway workspace: a temp dir with kitchen images, a manifest and a sandbox. */
export interface Workspace {
  dir: string;
  sandbox: Sandbox;
  apiKey: string;
  manifest: string;
  out: string;
  events: RunEvent[];
  /**
   * Runs the pipeline in-process with fast retry settings; resolves with the result or the thrown
   * error. `extra` is merged over the defaults group by group (`{ limits: { maxSubmissions: 2 } }`
   * keeps the default concurrency).
   */
  run(extra?: RunOverrides): Promise<RunResult>;
  report(): Promise<Report>;
  close(): Promise<void>;
}

/** Manifest rows for `n` change-style items over `n` distinct images, plus optional extra CSV lines. */
export interface WorkspaceOptions {
  items?: number;
  styles?: string[];
  sandbox?: SandboxOptions;
  /** Extra CSV rows (after the generated ones). */
  extraRows?: string[];
  /** How the kitchens are drawn (`mosaic`: every seed another layout). @default 'tinted' */
  look?: KitchenLook;
}

/** Run options to merge over a workspace's defaults, one group deep. */
export type RunOverrides = {
  [K in keyof RunOptions]?: RunOptions[K] extends object ? Partial<RunOptions[K]> : RunOptions[K];
};

/** `extra` over `defaults`: top-level values replace, option groups (plain objects) merge. */
function withDefaults(defaults: RunOptions, extra: RunOverrides): RunOptions {
  const merged: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(extra)) {
    const base = merged[key];
    const isGroup = (v: unknown) => typeof v === 'object' && v !== null && !(v instanceof AbortSignal);
    merged[key] = isGroup(base) && isGroup(value) ? { ...(base as object), ...(value as object) } : value;
  }
  return merged as unknown as RunOptions;
}

/** Workspaces made and not closed yet, oldest first. */
const open = new Set<Workspace>();

/** Creates a workspace with `items` distinct images, a CSV manifest and a running sandbox. */
export async function workspace(options: WorkspaceOptions = {}): Promise<Workspace> {
  const tmp = await tempDir('kb-engine-');
  const dir = tmp.dir;
  await mkdir(tmp.file('images'));
  const n = options.items ?? 4;
  const styles = options.styles ?? ['scandinavian', 'industrial', 'japandi', 'modern'];
  const rows = ['id,image,module,style,prompt,configuration'];
  for (let i = 0; i < n; i++) {
    await tmp.write(`images/k${i}.jpg`, await kitchenJpeg(i + 1, 320, 240, options.look ?? 'tinted'));
    rows.push(`k${i},images/k${i}.jpg,change-style,${styles[i % styles.length]},,`);
  }
  rows.push(...(options.extraRows ?? []));
  const manifest = await tmp.write('manifest.csv', `${rows.join('\n')}\n`);
  const apiKey = canaryKey();
  const sandbox = await startSandbox({ apiKey, ...QUICK_JOBS, ...options.sandbox });
  const out = path.join(dir, 'out');
  const events: RunEvent[] = [];
  const ws: Workspace = {
    dir,
    sandbox,
    apiKey,
    manifest,
    out,
    events,
    run: (extra = {}) =>
      runBatch(
        withDefaults(
          {
            manifest,
            out,
            cwd: dir,
            service: { baseUrl: sandbox.url, apiKey, retry: { retries: 4, baseMs: 100, capMs: 1000 } },
            limits: { concurrency: 4 },
            output: { html: false },
            onEvent: (e) => events.push(e),
          },
          extra,
        ),
      ),
    report: async () => JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report,
    close: async () => {
      open.delete(ws);
      await sandbox.close();
      await tmp.remove();
    },
  };
  open.add(ws);
  return ws;
}

/** Closes every workspace still open (sandbox closed, folder removed): `afterEach(closeWorkspaces)`. */
export async function closeWorkspaces(): Promise<void> {
  for (const ws of [...open].reverse()) await ws.close();
}

/** Runs `fn` and returns what it threw (or fails when it did not throw). */
export async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}
