/**
 * Temp folders for tests: `mkdtemp` under os.tmpdir() with a prefix, and their removal, either by
 * the caller ({@link tempDir}), when the current test finishes ({@link tempDirForTest}) or by hooks
 * around every test or the whole suite ({@link useTempDir}).
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, onTestFinished } from 'vitest';

/** A temp folder and what tests do in it. */
export interface TempDir {
  /** Absolute path of the folder. */
  readonly dir: string;
  /** Absolute path of `rel` inside the folder (nothing is created). */
  file(rel: string): string;
  /** Writes `data` to `rel` (parent folders created) and returns its absolute path. */
  write(rel: string, data: string | Uint8Array): Promise<string>;
  /** Removes the folder and everything in it. */
  remove(): Promise<void>;
}

/** Removes a folder (or file) and everything in it; nothing happens when it is gone already. */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** A new, empty temp folder `<os.tmpdir()>/<prefix>XXXXXX`; the caller removes it. */
export async function tempDir(prefix = 'kb-test-'): Promise<TempDir> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return {
    dir,
    file: (rel) => path.join(dir, rel),
    async write(rel, data) {
      const file = path.join(dir, rel);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, data);
      return file;
    },
    remove: () => removeDir(dir),
  };
}

/** A new temp folder, removed when the current test finishes (call it inside a test). */
export async function tempDirForTest(prefix?: string): Promise<TempDir> {
  const tmp = await tempDir(prefix);
  onTestFinished(() => tmp.remove());
  return tmp;
}

/** A temp folder made by hooks before each test (or once per file/describe) and removed after; use it inside tests. */
export function useTempDir(prefix: string, per: 'test' | 'suite' = 'test'): TempDir {
  let current: TempDir | undefined;
  const now = (): TempDir => {
    if (!current) throw new Error(`useTempDir('${prefix}') used outside the tests it was made for`);
    return current;
  };
  (per === 'test' ? beforeEach : beforeAll)(async () => {
    current = await tempDir(prefix);
  });
  (per === 'test' ? afterEach : afterAll)(async () => {
    await current?.remove();
    current = undefined;
  });
  return {
    get dir() {
      return now().dir;
    },
    file: (rel) => now().file(rel),
    write: (rel, data) => now().write(rel, data),
    remove: () => now().remove(),
  };
}

/** Every file below `dir`, recursively (none when `dir` or a folder in it is missing). */
export async function allFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  const walk = async (d: string) => {
    for (const entry of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(d, entry.name);
      if (entry.isDirectory()) await walk(full);
      else files.push(full);
    }
  };
  await walk(dir);
  return files;
}
