/**
 * Store operations counted for the metrics (docs/contract.md#monitoring): each read of a source and
 * each write or read of an output is told to a listener with a fixed vocabulary (which store, which
 * kind, which operation, whether it failed), never a key, path or URL. A wrapper at the seam, so no
 * store implementation knows about metrics.
 */
import type { OutputStore } from './types.js';

/** Which side of the seam: the sources read, or the outputs written. */
export type StoreSide = 'source' | 'output';
/** Where the bytes live: local files, http(s), S3. */
export type StoreKind = 'file' | 'http' | 's3';

/** One operation on a store, as the metrics count it. */
export interface StoreOp {
  store: StoreSide;
  kind: StoreKind;
  /** The method called: `stat`, `open`, `open_if_changed`, `put`, `get`, `head`, `list`, `delete`... */
  op: string;
  /** False when it threw (a missing object a caller expects is still a failure here). */
  ok: boolean;
}

/** Told of every counted store operation; must not throw. */
export type StoreOpListener = (op: StoreOp) => void;

/** Runs `call` and tells `listener` how it went; the result or error passes through unchanged. */
export async function counted<T>(
  listener: StoreOpListener,
  at: Omit<StoreOp, 'ok'>,
  call: () => Promise<T>,
): Promise<T> {
  try {
    const result = await call();
    listener({ ...at, ok: true });
    return result;
  } catch (error) {
    listener({ ...at, ok: false });
    throw error;
  }
}

/**
 * The output store with its calls counted (`put`, `writer`, `stage`, `get`, `head`, `delete`,
 * `sweep`, `local_copy`; a listing counts once when it ends); the same object when no listener.
 */
export function countedOutput(output: OutputStore, listener: StoreOpListener | undefined): OutputStore {
  if (!listener) return output;
  const kind: StoreKind = output.remote ? 's3' : 'file';
  const at = (op: string) => ({ store: 'output' as const, kind, op });
  const wrapped: OutputStore = {
    location: output.location,
    remote: output.remote,
    put: (key, body, options) => counted(listener, at('put'), () => output.put(key, body, options)),
    writer: (key, options) => counted(listener, at('writer'), () => output.writer(key, options)),
    stage: (near) => counted(listener, at('stage'), () => output.stage(near)),
    get: (key) => counted(listener, at('get'), () => output.get(key)),
    head: (key) => counted(listener, at('head'), () => output.head(key)),
    list: (prefix) => countedList(listener, at('list'), output.list(prefix)),
    delete: (key) => counted(listener, at('delete'), () => output.delete(key)),
    sweep: (prefix, olderThanMs) => counted(listener, at('sweep'), () => output.sweep(prefix, olderThanMs)),
    refOf: (relative) => output.refOf(relative),
    describe: (key) => output.describe(key),
  };
  const localCopy = output.localCopy?.bind(output);
  if (localCopy) wrapped.localCopy = (key) => counted(listener, at('local_copy'), () => localCopy(key));
  return wrapped;
}

async function* countedList<T>(
  listener: StoreOpListener,
  at: Omit<StoreOp, 'ok'>,
  items: AsyncIterable<T>,
): AsyncIterable<T> {
  try {
    yield* items;
  } catch (error) {
    listener({ ...at, ok: false });
    throw error;
  }
  // A listing the caller left early is not counted.
  listener({ ...at, ok: true });
}
