/**
 * Runs a TypeScript snippet in a child Node process with a small heap (`--max-old-space-size`), so a
 * test can show that code handles data larger than the memory it is given, and, as a control, that
 * the limit does bind (holding the same data whole dies).
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './cli.js';

/** How a heap-limited child ended. */
export interface HeapRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Writes `source` (an ES module; it may import from `src/` by absolute path, see {@link srcUrl})
 * into `dir` and runs it under `heapMb` of old-space heap, with a time limit.
 */
export async function runWithHeap(
  dir: string,
  source: string,
  heapMb: number,
  timeoutMs = 60_000,
): Promise<HeapRun> {
  const file = path.join(dir, `heap-${Math.random().toString(36).slice(2)}.mts`);
  await writeFile(file, source);
  const loader = pathToFileURL(path.join(REPO_ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [`--max-old-space-size=${heapMb}`, '--import', loader, file],
      { timeout: timeoutMs, maxBuffer: 1 << 20, env: { PATH: process.env.PATH ?? '' } },
      (error, stdout, stderr) => {
        const code = error ? ((error as { code?: unknown }).code as number | null) : 0;
        resolve({ code: typeof code === 'number' ? code : null, stdout, stderr });
      },
    );
  });
}

/** The file URL of a module under `src/`, for imports in a {@link runWithHeap} snippet. */
export function srcUrl(rel: string): string {
  return pathToFileURL(path.join(REPO_ROOT, 'src', rel)).href;
}
