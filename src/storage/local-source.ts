/**
 * The source store of local files: a reference is a path (made absolute against the process's
 * folder, as the manifest's expansion already made it). Errors are Node's own (`ENOENT`, `EISDIR`,
 * `EACCES`...), which preflight turns into `file_not_found` rejections.
 */
import { createReadStream } from 'node:fs';
import { open, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { OpenedSource, SourceInfo, SourceStore } from './types.js';

/** {@link SourceStore} over local files. Stateless: one instance serves a whole process. */
export class LocalSourceStore implements SourceStore {
  async stat(ref: string): Promise<SourceInfo> {
    const file = path.resolve(ref);
    const st = await stat(file);
    // A folder is no image: said the way the file system would say it, so callers classify it alike.
    if (!st.isFile()) throw Object.assign(new Error(`${file} is not a file`), { code: 'EISDIR', path: file });
    // size and mtime: what git trusts to say a file is unchanged, and what the journal records.
    return { ref, size: st.size, mtimeMs: st.mtimeMs, version: `${st.size}-${st.mtimeMs}` };
  }

  async open(ref: string): Promise<OpenedSource> {
    const info = await this.stat(ref);
    const file = path.resolve(ref);
    return {
      ...info,
      localPath: file,
      stream: () => createReadStream(file),
      bytes: () => readFile(file),
      head: async (n) => {
        const handle = await open(file, 'r');
        try {
          const buffer = Buffer.alloc(n);
          const { bytesRead } = await handle.read(buffer, 0, n, 0);
          return buffer.subarray(0, bytesRead);
        } finally {
          await handle.close();
        }
      },
    };
  }
}

/** The one local source store (it holds no state). */
export const localSources: SourceStore = new LocalSourceStore();
