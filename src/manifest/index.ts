/**
 * The manifest stage: reads a `.csv`, `.json` or `.jsonl`/`.ndjson` manifest (a local file, or one at
 * an http(s) URL or in S3), validates each row, expands globs (local and S3) and style lists into
 * items and checks item ids are unique. Everything that makes the manifest unreadable is a
 * {@link ManifestError} (exit 2, nothing submitted); a problem of one row only rejects that row's items.
 */
import { open } from 'node:fs/promises';
import path from 'node:path';
import { formatPosition, ManifestError, UsageError } from '../errors.js';
import { defaultSourceAccess, isRemoteRef, type SourceAccess } from '../storage/sources.js';
import type { Item } from '../types.js';
import { IdIndex } from '../util/id-index.js';
import { redactUrl } from '../util/redact-url.js';
import { readCsvRows } from './csv.js';
import { expandRow } from './expand.js';
import { readJsonlRows, readJsonRows } from './json.js';
import { type ManifestPlace, placeOf, S3GlobLister } from './remote-images.js';
import { fetchManifest, remoteName, statManifest } from './remote-manifest.js';
import type { RawRow, Warn } from './row.js';

export { checkStyle, suggestStyles } from './style-check.js';

/** Options of {@link readManifest}. */
export interface ReadManifestOptions {
  /**
   * Folder the manifest path resolves against. Images resolve against the manifest's own folder.
   * @default process.cwd()
   */
  cwd?: string;
  /**
   * How remote manifests, URL images and S3 globs are reached: the address guard's
   * `allowPrivate`, the size cap (`maxBytes`, also the remote manifest's), the S3 client's `env`.
   * @default defaultSourceAccess(): private addresses refused, 200 MB, `process.env`
   */
  access?: SourceAccess;
}

/** A manifest read and expanded. */
export interface ManifestResult {
  /** The manifest path as given. */
  file: string;
  /** Every expanded item in manifest order, rejected ones included (`item.rejection` set). */
  items: Item[];
  /** Problems that do not stop the run (unknown columns, a style listed twice), `file:line: ...`. */
  warnings: string[];
  /** Data rows read (CSV records after the header, JSON items, non-blank JSONL lines). */
  rows: number;
}

type Format = 'csv' | 'json' | 'jsonl';

function formatOf(file: string): Format | undefined {
  const ext = path.posix.extname(isRemoteRef(file) ? remoteName(file) : file).toLowerCase();
  if (ext === '.csv') return 'csv';
  if (ext === '.json') return 'json';
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  return undefined;
}

/** The manifest's format by its extension; any other extension is a manifest error. */
function formatOrRefuse(file: string): Format {
  const format = formatOf(file);
  if (format === undefined) {
    const ext = path.posix.extname(isRemoteRef(file) ? remoteName(file) : file);
    throw new ManifestError(
      { file: redactUrl(file) },
      `unsupported manifest type ${JSON.stringify(ext || '(no extension)')}; use .csv, .json, .jsonl or .ndjson`,
    );
  }
  return format;
}

/**
 * Checks, without reading it, that the manifest `file` (resolved against `cwd`) is of a type a reader
 * takes and can be opened: a command says that first, before it looks for a service, so a wrong
 * path is not reported as a missing key (docs/contract.md#manifest). A manifest at a URL or in S3
 * is asked for its head (under `access`, as {@link openManifest} reads it).
 *
 * @throws ManifestError naming the file (a URL redacted), as the readers do.
 */
export async function checkManifestFile(
  file: string,
  cwd: string = process.cwd(),
  access: SourceAccess = defaultSourceAccess(),
): Promise<void> {
  formatOrRefuse(file);
  if (isRemoteRef(file)) return statManifest(file, access);
  try {
    await (await open(path.resolve(cwd, file), 'r')).close();
  } catch (error) {
    throw new ManifestError({ file }, `cannot read the manifest: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** The rows of the manifest, streamed where the format allows it. */
async function* rowsOf(format: Format, absPath: string, file: string, warn: Warn): AsyncGenerator<RawRow> {
  if (format === 'csv') yield* readCsvRows(absPath, file, warn);
  else if (format === 'jsonl') yield* readJsonlRows(absPath, file, warn);
  else yield* await readJsonRows(absPath, file, warn);
}

/** Duplicates named in one manifest error; the rest are counted. */
const DUPLICATES_SHOWN = 20;

/**
 * Remembers every id seen, keyed case-insensitively: two ids that differ only in case name the
 * same result file on macOS's default file system, so they are duplicates too. It keeps a hash and
 * the line per id (a few tens of bytes), not the items. Repeats are collected while the manifest is
 * checked and confirmed at the end, by one more read up to the last of them, so that a single error
 * names every duplicate with both rows and files.
 */
class IdRegistry {
  readonly #seen = new IdIndex();
  /** Repeats by hash (candidates: see {@link IdIndex}), in manifest order. */
  readonly #repeats: Array<{ key: string; firstLine: number; item: Item }> = [];

  constructor(private readonly manifest: { file: string; rows: () => AsyncGenerator<Item> }) {}

  /** Whether an id (any case) was seen (a hash match; see {@link IdIndex}). */
  has(id: string): boolean {
    return this.#seen.get(id.toLowerCase()) !== undefined;
  }

  add(item: Item): void {
    const key = item.id.toLowerCase();
    const line = this.#seen.get(key);
    if (line !== undefined) this.#repeats.push({ key, firstLine: line, item });
    else this.#seen.set(key, item.source.line);
  }

  /** Throws one ManifestError naming every duplicate id, if there are any. */
  async check(): Promise<void> {
    if (this.#repeats.length === 0) return;
    const wanted = new Map(this.#repeats.map((r) => [r.key, r.firstLine]));
    const last = Math.max(...this.#repeats.map((r) => r.firstLine));
    const first = new Map<string, Item>();
    for await (const item of this.manifest.rows()) {
      if (item.source.line > last) break;
      const key = item.id.toLowerCase();
      if (wanted.has(key) && !first.has(key)) first.set(key, item);
    }
    const pairs = this.#repeats.flatMap((r) => {
      const earlier = first.get(r.key);
      // Another id with the same hash: not a duplicate.
      return earlier && earlier.id.toLowerCase() === r.key ? [{ first: earlier, item: r.item }] : [];
    });
    if (pairs.length === 0) return;
    const shown = pairs.slice(0, DUPLICATES_SHOWN).map(({ first, item }) => `  - ${describe(first, item)}`);
    const more = pairs.length > DUPLICATES_SHOWN ? [`  - and ${pairs.length - DUPLICATES_SHOWN} more`] : [];
    const head = pairs.length === 1 ? 'a duplicate item id' : `${pairs.length} duplicate item ids`;
    throw new ManifestError(
      { file: this.manifest.file, line: pairs[0]!.item.source.line },
      `${head} (each id names one result file):\n${[...shown, ...more].join('\n')}`,
      { code: 'duplicate_id' },
    );
  }
}

/** One duplicate: the id, both rows and images, and the advice that fits how it came about. */
function describe(first: Item, item: Item): string {
  const caseNote = first.id === item.id ? '' : ` (same as "${first.id}" when case is ignored)`;
  const shown = (image: string) => JSON.stringify(redactUrl(image));
  const where =
    first.source.line === item.source.line
      ? `line ${item.source.line}, images ${shown(first.image)} and ${shown(item.image)}`
      : `lines ${first.source.line} and ${item.source.line}` +
        (first.image === item.image ? '' : `, images ${shown(first.image)} and ${shown(item.image)}`);
  let advice: string;
  if (first.source.line !== item.source.line) {
    advice = 'give one of the rows another id (the id column)';
  } else if (path.posix.dirname(first.image) !== path.posix.dirname(item.image)) {
    advice =
      'files in different folders share a name: give each folder a row of its own with an id (used as a prefix)';
  } else {
    advice = 'the file names differ only in case: rename one of the files';
  }
  return `"${item.id}"${caseNote}: ${where}; ${advice}`;
}

/** Options of {@link openManifest}. */
export interface OpenManifestOptions extends ReadManifestOptions {
  /** Keeps only the items it accepts (a shard); the others are checked but not counted or read. */
  filter?: (item: Item) => boolean;
  /** Called with each kept item, in order, while the manifest is checked. */
  onItem?: (item: Item) => void;
}

/** A manifest checked whole, to be read item by item. */
export interface Manifest {
  /** The manifest path or reference as given (a URL whole: redact it before showing it). */
  file: string;
  /** Data rows read (CSV records after the header, JSON items, non-blank JSONL lines). */
  rows: number;
  /** Items kept (after expansion and the filter), rejected ones included. */
  count: number;
  /** Problems that do not stop the run (unknown columns, a style listed twice), `file:line: ...`. */
  warnings: string[];
  /**
   * The kept items again, in manifest order: the file is read and its globs expanded once more, so
   * memory holds one row at a time. An id that was not there when the manifest was checked (a file
   * that appeared since under a glob) comes rejected (`invalid_item`), never unchecked.
   */
  items(): AsyncGenerator<Item>;
  /**
   * Releases what reading holds: a remote manifest's temp copy (else removed at process exit) and
   * the S3 client of its globs. {@link items} may not be read after it; safe to call twice.
   */
  close(): Promise<void>;
}

/** Where the rows are read from: the file itself, or a remote manifest's local copy. */
interface ManifestSource {
  absPath: string;
  /** The manifest as messages and `Item.source.file` show it (a URL redacted). */
  shown: string;
  place: ManifestPlace;
  release(): Promise<void>;
}

async function sourceOf(file: string, cwd: string, access: SourceAccess): Promise<ManifestSource> {
  if (!isRemoteRef(file)) {
    const absPath = path.resolve(cwd, file);
    return {
      absPath,
      shown: file,
      place: { kind: 'local', dir: path.dirname(absPath) },
      release: async () => {},
    };
  }
  // The reference is checked before anything is fetched: a malformed one is refused as it is.
  const place = placeOf(file);
  const fetched = await fetchManifest(file, access);
  return { absPath: fetched.path, shown: redactUrl(file), place, release: fetched.remove };
}

/**
 * Checks the manifest `file` (resolved against `options.cwd`; or at an http(s) URL or in S3, fetched
 * once into a temp file) whole, streamed: rows, globs, style lists, unique ids. CSV and JSONL are
 * read as streams; a JSON document is read whole.
 *
 * @throws ManifestError when the file cannot be fetched, read or parsed, lacks an image column, has
 *   a duplicate header, or two items share an id (the message names file and line).
 */
export async function openManifest(file: string, options: OpenManifestOptions = {}): Promise<Manifest> {
  const format = formatOrRefuse(file);
  const access = options.access ?? defaultSourceAccess();
  let source: ManifestSource;
  try {
    source = await sourceOf(file, options.cwd ?? process.cwd(), access);
  } catch (error) {
    if (error instanceof UsageError)
      throw new ManifestError({ file: redactUrl(file) }, error.message, { cause: error });
    throw error;
  }
  const { absPath, shown, place } = source;
  const s3 = new S3GlobLister(access.env);
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    s3.close();
    await source.release();
  };
  const warnings: string[] = [];
  const expanded = async function* (warn: Warn, onRow = () => {}): AsyncGenerator<Item> {
    const ctx = { file: shown, place, s3, warn };
    for await (const row of rowsOf(format, absPath, shown, warn)) {
      onRow();
      yield* await expandRow(row, ctx);
    }
  };
  const silent: Warn = () => {};
  const ids = new IdRegistry({ file: shown, rows: () => expanded(silent) });
  const keep = options.filter ?? (() => true);
  let rows = 0;
  let count = 0;
  const warn: Warn = (message, line) => {
    warnings.push(
      `${formatPosition(line === undefined ? { file: shown } : { file: shown, line })}: ${message}`,
    );
  };
  try {
    for await (const item of expanded(warn, () => rows++)) {
      ids.add(item);
      if (!keep(item)) continue;
      count++;
      options.onItem?.(item);
    }
    await ids.check();
  } catch (error) {
    await close();
    throw error;
  }
  if (rows === 0) warn('the manifest has no rows; nothing to do');
  return {
    file,
    rows,
    count,
    warnings,
    async *items() {
      if (closed) throw new Error(`the manifest ${shown} was closed; open it again to read its items`);
      for await (const item of expanded(silent)) {
        if (!keep(item)) continue;
        yield ids.has(item.id) ? item : appeared(item);
      }
    },
    close,
  };
}

/** An item that was not in the manifest when it was checked: rejected, with the reason. */
function appeared(item: Item): Item {
  return {
    ...item,
    rejection: {
      code: 'invalid_item',
      message: `${redactUrl(item.image)}: appeared after the manifest was checked (a new file under a glob?); rerun to include it`,
    },
  };
}

/**
 * Reads the manifest `file` whole into items (for small manifests and tests; a run streams them
 * with {@link openManifest}).
 *
 * @throws ManifestError as {@link openManifest}.
 */
export async function readManifest(file: string, options: ReadManifestOptions = {}): Promise<ManifestResult> {
  const items: Item[] = [];
  const manifest = await openManifest(file, { ...options, onItem: (item) => items.push(item) });
  await manifest.close();
  return { file, items, warnings: manifest.warnings, rows: manifest.rows };
}
