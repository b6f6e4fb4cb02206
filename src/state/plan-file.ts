/**
 * The run's items in manifest order (after sharding), one JSON line each in `<out>/plan.jsonl`
 * (`["<id>","<image>","<module>","<style or null>"]`): what `report` lists, in which order, and what
 * it says of items the run never reached. A file beside the journal rather than one journal line,
 * so a catalogue of 10^6 items is written and read as a stream.
 */
import path from 'node:path';
import { createInterface } from 'node:readline';
import { StateError } from '../errors.js';
import { toOutputStore } from '../storage/local-output.js';
import type { OutputStore } from '../storage/types.js';
import { redactUrl } from '../util/redact-url.js';
import type { JournalRecord } from './records.js';
import type { StateLookup } from './table.js';

/** Name of the plan file in the output folder. */
export const PLAN_FILE = 'plan.jsonl';

/** One planned item, as the report shows an item the run has not reached. */
export interface PlanEntry {
  id: string;
  image: string;
  module: string;
  style: string | null;
}

/**
 * The plan line of an entry. The plan is for people and reports only (the journal keeps what a
 * rerun reads), so a pre-signed URL's signature is left out here (docs/contract.md#secrets-in-urls).
 */
export function planLine(entry: PlanEntry): string {
  return `${JSON.stringify([entry.id, redactUrl(entry.image), entry.module, entry.style])}\n`;
}

/**
 * Plan lines kept until the run folder is open, in chunks of 64 kB: about 90 bytes per item and no
 * object per item, so a catalogue of 10^5 items costs a few MB here.
 */
export class PlanLines implements Iterable<string> {
  readonly #chunks: string[] = [];
  #current = '';
  count = 0;

  add(entry: PlanEntry): void {
    this.count++;
    this.#current += planLine(entry);
    if (this.#current.length >= 64 * 1024) {
      this.#chunks.push(this.#current);
      this.#current = '';
    }
  }

  *[Symbol.iterator](): Iterator<string> {
    yield* this.#chunks;
    if (this.#current) yield this.#current;
  }

  /** Drops the lines once written (the run goes on for hours; they need not). */
  clear(): void {
    this.#chunks.length = 0;
    this.#current = '';
  }
}

/** Writes `plan.jsonl` into the run's outputs whole or not at all, from lines made by {@link planLine}. */
export async function writePlanFile(out: OutputStore | string, lines: Iterable<string>): Promise<void> {
  const file = await toOutputStore(out).writer(PLAN_FILE, { contentType: 'application/x-ndjson' });
  try {
    for (const line of lines) await file.write(line);
    await file.commit();
  } catch (error) {
    await file.abort();
    throw error;
  }
}

/**
 * The entries of a run's plan, in order: from its plan file, from the inline id list of a journal
 * written by an earlier version (entries then come from `states`), or, with no plan at all, every
 * item the journal knows.
 */
export async function* planEntries(
  out: OutputStore | string,
  plan: Extract<JournalRecord, { t: 'plan' }> | undefined,
  states: StateLookup,
): AsyncGenerator<PlanEntry> {
  if (plan?.file) {
    // The record names the file as it was written: only its name is trusted, inside the run's outputs.
    const output = toOutputStore(out);
    const key = path.basename(plan.file);
    const file = output.describe(key);
    let line = 0;
    for await (const text of createInterface({
      input: await output.get(key),
      crlfDelay: Number.POSITIVE_INFINITY,
    })) {
      line++;
      if (text === '') continue;
      const entry = parseLine(text);
      if (!entry)
        throw new StateError(
          'plan_corrupt',
          `${file}:${line}: not a plan line; rerun the run to write it again`,
        );
      yield entry;
    }
    return;
  }
  const ids: Iterable<string> = plan?.ids ?? states.keys();
  for (const id of ids) {
    const state = states.get(id);
    if (state) yield { id, image: state.image, module: state.module, style: state.style };
  }
}

function parseLine(text: string): PlanEntry | null {
  try {
    const value = JSON.parse(text) as unknown;
    if (!Array.isArray(value) || value.length !== 4) return null;
    const [id, image, module, style] = value as unknown[];
    if (typeof id !== 'string' || typeof image !== 'string' || typeof module !== 'string') return null;
    if (style !== null && typeof style !== 'string') return null;
    return { id, image, module, style };
  } catch {
    return null;
  }
}
