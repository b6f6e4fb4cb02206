/** Helpers of the manifest tests: empty image files and the ManifestError a read must fail with. */
import { expect } from 'vitest';
import { ManifestError } from '../../src/errors.js';
import type { TempDir } from '../helpers/tmp.js';

/** Creates empty image files (folders created) under `tmp`; the manifest stage never opens them. */
export async function touch(tmp: TempDir, ...rels: string[]): Promise<void> {
  for (const rel of rels) await tmp.write(rel, '');
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
