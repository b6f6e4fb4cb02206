import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import type { RunEvent } from '../../src/pipeline/events.js';
import { type RunOptions, type RunResult, runBatch } from '../../src/pipeline/run.js';
import { type Sandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/index.js';
import type { Report } from '../../src/types.js';

/** A throwaway workspace: a temp dir with kitchen images, a manifest and a sandbox. */
export interface Workspace {
  dir: string;
  sandbox: Sandbox;
  apiKey: string;
  manifest: string;
  out: string;
  events: RunEvent[];
  /** Runs the engine in-process with fast retry settings; resolves with the result or the thrown error. */
  run(extra?: Partial<RunOptions>): Promise<RunResult>;
  report(): Promise<Report>;
  close(): Promise<void>;
}

/** Draws a small kitchen-ish JPEG (distinct per seed) with sharp. */
export async function kitchenJpeg(seed: number, width = 320, height = 240): Promise<Buffer> {
  const hue = (seed * 47) % 360;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
    <rect width="100%" height="100%" fill="hsl(${hue},30%,85%)"/>
    <rect x="0" y="${height * 0.55}" width="${width}" height="${height * 0.45}" fill="hsl(${(hue + 30) % 360},35%,45%)"/>
    <rect x="${width * 0.1}" y="${height * 0.1}" width="${width * 0.3}" height="${height * 0.3}" fill="#cde"/>
    <rect x="${width * 0.5}" y="${height * 0.45}" width="${width * 0.4}" height="${height * 0.08}" fill="#333"/>
  </svg>`;
  return sharp(Buffer.from(svg)).jpeg({ quality: 85 }).toBuffer();
}

/** Manifest rows for `n` change-style items over `n` distinct images, plus optional extra CSV lines. */
export interface WorkspaceOptions {
  items?: number;
  styles?: string[];
  sandbox?: SandboxOptions;
  /** Extra CSV rows (after the generated ones). */
  extraRows?: string[];
}

/** Creates a workspace with `items` distinct images, a CSV manifest and a running sandbox. */
export async function workspace(options: WorkspaceOptions = {}): Promise<Workspace> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kb-engine-'));
  await mkdir(path.join(dir, 'images'));
  const n = options.items ?? 4;
  const styles = options.styles ?? ['scandinavian', 'industrial', 'japandi', 'modern'];
  const rows = ['id,image,module,style,prompt,configuration'];
  for (let i = 0; i < n; i++) {
    await writeFile(path.join(dir, 'images', `k${i}.jpg`), await kitchenJpeg(i + 1));
    rows.push(`k${i},images/k${i}.jpg,change-style,${styles[i % styles.length]},,`);
  }
  rows.push(...(options.extraRows ?? []));
  const manifest = path.join(dir, 'manifest.csv');
  await writeFile(manifest, `${rows.join('\n')}\n`);
  const apiKey = `sk_canary_${randomBytes(8).toString('hex')}`;
  const sandbox = await startSandbox({
    apiKey,
    processingMs: 200,
    jitterMs: 100,
    queuedMs: 20,
    ...options.sandbox,
  });
  const out = path.join(dir, 'out');
  const events: RunEvent[] = [];
  return {
    dir,
    sandbox,
    apiKey,
    manifest,
    out,
    events,
    run: (extra = {}) =>
      runBatch({
        manifest,
        out,
        cwd: dir,
        baseUrl: sandbox.url,
        apiKey,
        concurrency: 4,
        html: false,
        retry: { retries: 4, baseMs: 100, capMs: 1000 },
        onEvent: (e) => events.push(e),
        ...extra,
      }),
    report: async () => JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report,
    close: async () => {
      await sandbox.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** POSTs to the module endpoints the sandbox received. */
export function createRequests(sandbox: Sandbox): number {
  return sandbox.stats.requests.filter((r) => r.method === 'POST' && r.path.startsWith('/v1/modules/'))
    .length;
}

/** Every file below `dir`, recursively, as [path, bytes]. */
export async function allFiles(dir: string): Promise<Array<[string, Buffer]>> {
  const out: Array<[string, Buffer]> = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name);
    out.push([file, await readFile(file)]);
  }
  return out;
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
