/**
 * Shared fixtures of the resume tests: real images made with sharp, a real CSV manifest in a temp
 * folder, a sandbox in this process (so its statistics can be read) and the CLI as a child process.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { afterEach, expect } from 'vitest';
import { type Sandbox, type SandboxFaults, startSandbox } from '../../src/sandbox/index.js';
import type { JournalRecord } from '../../src/state/records.js';
import type { Report } from '../../src/types.js';
import {
  type CliProcess,
  type CliResult,
  killAllClis,
  runCli,
  type SpawnOptions,
  spawnCli,
} from '../helpers/cli.js';
import { canaryKey } from '../helpers/sandbox.js';
import { allFiles, removeDir, tempDir } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';

/** One planned item of a test manifest. */
export interface TestItem {
  /** The item id the CLI derives (`<image name>__<style>`). */
  id: string;
  /** Absolute path of its source image. */
  image: string;
  style: string;
}

/** A temp folder with images and a manifest, and a key for the sandbox. */
export interface Fixture {
  dir: string;
  manifest: string;
  apiKey: string;
  items: TestItem[];
}

const STYLES = ['modern', 'japandi', 'industrial', 'coastal', 'farmhouse', 'scandinavian'];

/**
 * Makes `count` images in `<dir>/images/k<i>.jpg` and a CSV manifest `<dir>/<name>.csv`, one
 * change-style row per image, styles round-robin.
 */
export async function makeFixture(
  count: number,
  options: { dir?: string; name?: string; styles?: (i: number) => string } = {},
): Promise<Fixture> {
  const dir = options.dir ?? (await tempDir('kb-resume-')).dir;
  await mkdir(path.join(dir, 'images'), { recursive: true });
  const items: TestItem[] = [];
  const rows = ['id,image,style'];
  for (let i = 0; i < count; i++) {
    const style = options.styles?.(i) ?? STYLES[i % STYLES.length]!;
    const image = path.join(dir, 'images', `k${i}.jpg`);
    await writeFile(image, await kitchenJpeg(i));
    rows.push(`k${i},images/k${i}.jpg,${style}`);
    items.push({ id: `k${i}__${style}`, image, style });
  }
  const manifest = path.join(dir, `${options.name ?? 'batch'}.csv`);
  await writeFile(manifest, `${rows.join('\n')}\n`);
  return { dir, manifest, apiKey: canaryKey(12), items };
}

/** Rewrites the manifest from `items` (to change a style, say). */
export async function writeManifest(fixture: Fixture): Promise<void> {
  const rows = ['id,image,style'];
  for (const item of fixture.items) {
    const name = path.basename(item.image, '.jpg');
    rows.push(`${name},${path.relative(fixture.dir, item.image)},${item.style}`);
  }
  await writeFile(fixture.manifest, `${rows.join('\n')}\n`);
}

/** A sandbox on 127.0.0.1, port 0, with the fixture's key. */
export function sandboxFor(
  fixture: Fixture,
  options: { processingMs?: number; jitterMs?: number; faults?: Partial<SandboxFaults> } = {},
): Promise<Sandbox> {
  return startSandbox({
    host: '127.0.0.1',
    port: 0,
    apiKey: fixture.apiKey,
    processingMs: options.processingMs ?? 400,
    jitterMs: options.jitterMs ?? 200,
    faults: options.faults ?? {},
  });
}

/** `run <manifest> --base-url ... --out ...` plus `extra`, as argv. */
export function runArgs(fixture: Fixture, sandbox: Sandbox, out: string, extra: string[] = []): string[] {
  return [
    'run',
    fixture.manifest,
    '--base-url',
    sandbox.url,
    '--out',
    out,
    '--no-progress',
    '--concurrency',
    '4',
    ...extra,
  ];
}

/** Spawns a run of the fixture (key in the environment only). */
export function startRun(
  fixture: Fixture,
  sandbox: Sandbox,
  out: string,
  extra: string[] = [],
  options: SpawnOptions = {},
): CliProcess {
  return spawnCli(runArgs(fixture, sandbox, out, extra), {
    cwd: fixture.dir,
    ...options,
    env: { KITCHEN_API_KEY: fixture.apiKey, ...options.env },
  });
}

/** Runs the fixture to the end. */
export function run(
  fixture: Fixture,
  sandbox: Sandbox,
  out: string,
  extra: string[] = [],
  options: SpawnOptions & { timeoutMs?: number } = {},
): Promise<CliResult> {
  return runCli(runArgs(fixture, sandbox, out, extra), {
    cwd: fixture.dir,
    ...options,
    env: { KITCHEN_API_KEY: fixture.apiKey, ...options.env },
  });
}

/** The createsByItem key of an item: sha256 of the uploaded bytes (the source, sent unchanged). */
export async function itemKey(item: TestItem): Promise<string> {
  const bytes = await readFile(item.image);
  return `${createHash('sha256').update(bytes).digest('hex')}|change-style|${item.style}`;
}

/** Jobs the sandbox created per item id. */
export async function createsPerItem(fixture: Fixture, sandbox: Sandbox): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const item of fixture.items)
    counts.set(item.id, sandbox.stats.createsByItem.get(await itemKey(item)) ?? 0);
  return counts;
}

/** The journal's records; a torn last line (a killed append) is left out. */
export async function readJournalRecords(out: string): Promise<JournalRecord[]> {
  let text: string;
  try {
    text = await readFile(path.join(out, 'journal.jsonl'), 'utf8');
  } catch {
    return [];
  }
  const records: JournalRecord[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      records.push(JSON.parse(line) as JournalRecord);
    } catch {
      // torn last line of a killed run
    }
  }
  return records;
}

/** report.json of a run folder. */
export async function readReport(out: string): Promise<Report> {
  return JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report;
}

/** File names in `<out>/results` (none when missing). */
export async function resultNames(out: string): Promise<string[]> {
  return readdir(path.join(out, 'results')).catch(() => []);
}

/** sha256 of a file. */
export async function fileSha(file: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(file))
    .digest('hex');
}

/** Fails when `secret` occurs in any file under `out` or in any of `texts` (I4). */
export async function expectSecretAbsent(secret: string, out: string, texts: string[]): Promise<void> {
  for (const file of await allFiles(out)) {
    const bytes = await readFile(file).catch(() => Buffer.alloc(0));
    expect(bytes.includes(secret), `API key found in ${file}`).toBe(false);
  }
  texts.forEach((text, i) => {
    expect(text.includes(secret), `API key found in captured output #${i}`).toBe(false);
  });
}

/** Items whose last `submitting` has no outcome (accepted, not_created, refused) in `records`. */
export function openSubmissions(records: readonly JournalRecord[]): string[] {
  const open = new Set<string>();
  for (const r of records) {
    if (r.t === 'submitting') open.add(r.id);
    if (r.t === 'accepted' || r.t === 'not_created' || r.t === 'refused') open.delete(r.id);
  }
  return [...open];
}

/** What a run folder held just before a rerun, to compare the rerun against. */
export interface Snapshot {
  /** Jobs created per item id at the sandbox. */
  creates: Map<string, number>;
  /** Index into sandbox.stats.requests / storageRequests where the rerun starts. */
  requests: number;
  storage: number;
  /** Item id → job id journaled as accepted. */
  accepted: Map<string, string>;
  /** Item id → job id of results journaled as downloaded whose file is intact. */
  finished: Map<string, string>;
  records: JournalRecord[];
}

/** Reads the state a rerun starts from. */
export async function snapshot(fixture: Fixture, sandbox: Sandbox, out: string): Promise<Snapshot> {
  const records = await readJournalRecords(out);
  const accepted = new Map<string, string>();
  const finished = new Map<string, string>();
  for (const r of records) {
    if (r.t === 'accepted') accepted.set(r.id, r.job_id);
    if (r.t === 'downloaded') {
      const file = path.join(out, r.output);
      if (existsSync(file) && (await fileSha(file)) === r.sha256) finished.set(r.id, r.job_id);
    }
  }
  return {
    creates: await createsPerItem(fixture, sandbox),
    requests: sandbox.stats.requests.length,
    storage: sandbox.stats.storageRequests.length,
    accepted,
    finished,
    records,
  };
}

/**
 * The invariants after a rerun that should have finished everything:
 * - exit 0 and every item succeeded;
 * - (I1) no item created at the service more often than its report `submissions` says, and every
 *   item created twice is counted in `possible_duplicates`;
 * - (I2) an item whose job id was journaled was not submitted again and kept that job;
 * - a result finished before the rerun was not downloaded again;
 * - (I3) every result file decodes and matches the report's sha256, no temp file remains (but those
 *   of the killed pids in `tolerate`).
 */
export async function expectRerunComplete(
  fixture: Fixture,
  sandbox: Sandbox,
  out: string,
  before: Snapshot,
  rerun: CliResult,
  label: string,
  options: { tolerate?: number[] } = {},
): Promise<Report> {
  const context = `${label}\nstdout:\n${rerun.stdout}\nstderr:\n${rerun.stderr}`;
  expect(rerun.code, context).toBe(0);
  const report = await readReport(out);
  const totals = report.run.totals;
  expect(totals.items, context).toBe(fixture.items.length);
  expect(totals.succeeded, context).toBe(fixture.items.length);
  const creates = await createsPerItem(fixture, sandbox);
  let flagged = 0;
  for (const item of fixture.items) {
    const row = report.items.find((i) => i.id === item.id);
    expect(row, `${label}: ${item.id} in report`).toBeDefined();
    if (!row) continue;
    const made = creates.get(item.id) ?? 0;
    expect(made, `${label}: ${item.id} created at least once`).toBeGreaterThanOrEqual(1);
    // I1: every job the service created is counted; more than one only where flagged.
    expect(
      made,
      `${label}: ${item.id} created ${made}x, report submissions ${row.submissions}`,
    ).toBeLessThanOrEqual(row.submissions);
    if (row.ambiguous_resends > 0) flagged++;
    // I2: a journaled job id is polled, never resubmitted, and it is the job that delivered.
    const jobId = before.accepted.get(item.id);
    if (jobId !== undefined) {
      expect(
        made - (before.creates.get(item.id) ?? 0),
        `${label}: ${item.id} resubmitted after its job id was journaled`,
      ).toBe(0);
      expect(row.job_id, `${label}: ${item.id} lost its job id`).toBe(jobId);
    }
    // A finished result is not fetched again.
    const finishedJob = before.finished.get(item.id);
    if (finishedJob !== undefined) {
      const again = sandbox.stats.storageRequests
        .slice(before.storage)
        .filter((r) => r.path.includes(finishedJob));
      expect(again.length, `${label}: finished ${item.id} downloaded again`).toBe(0);
    }
    // I3: whole result files.
    expect(row.output, `${label}: ${item.id} output`).toBeTruthy();
    const file = path.join(out, row.output ?? '');
    expect(await fileSha(file), `${label}: ${item.id} sha256`).toBe(row.sha256);
    const stats = await sharp(file, { failOn: 'truncated' }).stats();
    expect(stats.channels.length, `${label}: ${item.id} decodes`).toBeGreaterThan(0);
  }
  expect(totals.possible_duplicates, `${label}: possible_duplicates`).toBe(flagged);
  // Flagged are exactly the items whose POST was in flight, its outcome never journaled.
  const flaggedIds = report.items.filter((i) => i.ambiguous_resends > 0).map((i) => i.id);
  expect(flaggedIds.sort(), `${label}: flagged items vs open submissions`).toEqual(
    openSubmissions(before.records).sort(),
  );
  // Temp files (`.part`, `.tmp`) of the rerun must be gone; those of killed runs are the caller's
  // business (`tolerate`), see the dedicated leftover test.
  const temps = (await resultNames(out)).filter((n) => /\.(part|tmp)$/.test(n));
  const tolerated = (n: string) => (options.tolerate ?? []).some((pid) => n.includes(`.${pid}.`));
  expect(
    temps.filter((n) => !tolerated(n)),
    `${label}: temp files left in results/`,
  ).toEqual([]);
  expect(existsSync(path.join(out, '.lock')), `${label}: lock released`).toBe(false);
  return report;
}

/**
 * Per-test setup for a test file. `setup(count, options)` makes a fixture of `count` items and a
 * sandbox for it; `cleanup.push(step)` adds a step of one's own. After each test, the CLIs still
 * running are killed and the steps run in reverse order.
 */
export function perTest(defaults: Parameters<typeof sandboxFor>[1] = {}) {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    await killAllClis();
    for (const step of cleanup.splice(0).reverse()) await step();
  });
  async function setup(
    count: number,
    options: Parameters<typeof sandboxFor>[1] = {},
  ): Promise<{ fixture: Fixture; sandbox: Sandbox; out: string }> {
    const fixture = await makeFixture(count);
    cleanup.push(() => removeDir(fixture.dir));
    const sandbox = await sandboxFor(fixture, { ...defaults, ...options });
    cleanup.push(() => sandbox.close());
    return { fixture, sandbox, out: path.join(fixture.dir, 'out') };
  }
  return { setup, cleanup };
}
