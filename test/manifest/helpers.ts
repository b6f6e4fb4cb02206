/** Real files in a temp folder for the manifest tests. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { ManifestError } from '../../src/errors.js';

/** A temp folder that tests write manifests and images into. */
export interface TempDir {
  dir: string;
  /** Writes `content` to `rel` (folders created) and returns the absolute path. */
  write(rel: string, content: string | Buffer): Promise<string>;
  /** Creates empty image files; the manifest stage never opens them. */
  touch(...rels: string[]): Promise<void>;
  cleanup(): Promise<void>;
}

export async function makeTempDir(): Promise<TempDir> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kb-manifest-'));
  const write = async (rel: string, content: string | Buffer) => {
    const file = path.join(dir, rel);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content);
    return file;
  };
  return {
    dir,
    write,
    touch: async (...rels) => {
      for (const rel of rels) await write(rel, '');
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** Awaits `promise`, asserts it failed with a ManifestError and returns that error. */
export async function manifestError(promise: Promise<unknown>): Promise<ManifestError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ManifestError);
  return error as ManifestError;
}
