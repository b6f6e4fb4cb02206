/**
 * The manifest stage: reads a `.csv`, `.json` or `.jsonl`/`.ndjson` manifest, validates each row,
 * expands globs and style lists into items and checks item ids are unique. Everything that makes
 * the manifest unreadable is a {@link ManifestError} (exit 2, nothing submitted); a problem of one
 * row only rejects that row's items.
 */
import path from 'node:path';
import { formatPosition, ManifestError } from '../errors.js';
import type { Item } from '../types.js';
import { IdIndex } from '../util/id-index.js';
import { readCsvRows } from './csv.js';
import { expandRow } from './expand.js';
import { readJsonlRows, readJsonRows } from './json.js';
import type { RawRow, Warn } from './row.js';

export { checkStyle, suggestStyles } from './styles.js';

/** Options of {@link readManifest}. */
export interface ReadManifestOptions {
  /**
   * Folder the manifest path resolves against. Images resolve against the manifest's own folder.
   * @default process.cwd()
   */
  cwd?: string;
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
  const ext = path.extname(file).toLowerCase();
  if (ext === '.csv') return 'csv';
  if (ext === '.json') return 'json';
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  return undefined;
}

/** The rows of the manifest, streamed where the format allows it. */
async function* rowsOf(format: Format, absPath: string, file: string, warn: Warn): AsyncGenerator<RawRow> {
  if (format === 'csv') yield* readCsvRows(absPath, file, warn);
  else if (format === 'jsonl') yield* readJsonlRows(absPath, file, warn);
  else yield* await readJsonRows(absPath, file, warn);
}

/**
 * Remembers every id seen, keyed case-insensitively: two ids that differ only in case name the
 * same result file on macOS's default file system, so they are duplicates too. It keeps a hash and
 * the line per id (a few tens of bytes), not the items: a repeat is confirmed, and named with both
 * rows, by reading the manifest again up to the first occurrence.
 */
class IdRegistry {
  readonly #seen = new IdIndex<number>();

  constructor(private readonly manifest: { file: string; rows: () => AsyncGenerator<Item> }) {}

  /** Whether an id (any case) was seen (a hash match; see {@link IdIndex}). */
  has(id: string): boolean {
    return this.#seen.get(id.toLowerCase()) !== undefined;
  }

  async add(item: Item): Promise<void> {
    const key = item.id.toLowerCase();
    const line = this.#seen.get(key);
    if (line !== undefined) {
      const first = await this.#find(key, line);
      if (first) throw this.#duplicate(first, item);
    }
    this.#seen.set(key, item.source.line);
  }

  /** The first item with this id (any case), at or before `line`; null when the hash matched another id. */
  async #find(key: string, line: number): Promise<Item | null> {
    for await (const item of this.manifest.rows()) {
      if (item.source.line > line) break;
      if (item.id.toLowerCase() === key) return item;
    }
    return null;
  }

  #duplicate(first: Item, item: Item): ManifestError {
    const lines = `rows at lines ${first.source.line} and ${item.source.line}`;
    const caseNote = first.id === item.id ? '' : ` (same as "${first.id}" when case is ignored)`;
    // Two items of one row (a glob matching k1.jpg and k1.png) need their images to be told apart.
    const images =
      first.source.line === item.source.line || first.image !== item.image
        ? `; images ${JSON.stringify(first.image)} and ${JSON.stringify(item.image)}`
        : '';
    return new ManifestError(
      { file: this.manifest.file, line: item.source.line },
      `duplicate item id "${item.id}"${caseNote}: ${lines}${images}; give one of them another id`,
      { code: 'duplicate_id' },
    );
  }
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
  /** The manifest path as given. */
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
}

/**
 * Checks the manifest `file` (resolved against `options.cwd`) whole, streamed: rows, globs, style
 * lists, unique ids. CSV and JSONL are read as streams; a JSON document is read whole.
 *
 * @throws ManifestError when the file cannot be read or parsed, lacks an `image` column, has a
 *   duplicate header, or two items share an id (the message names file and line).
 */
export async function openManifest(file: string, options: OpenManifestOptions = {}): Promise<Manifest> {
  const format = formatOf(file);
  if (format === undefined) {
    throw new ManifestError(
      { file },
      `unsupported manifest type ${JSON.stringify(path.extname(file) || '(no extension)')}; use .csv, .json, .jsonl or .ndjson`,
    );
  }
  const absPath = path.resolve(options.cwd ?? process.cwd(), file);
  const warnings: string[] = [];
  const expanded = async function* (warn: Warn, onRow = () => {}): AsyncGenerator<Item> {
    const ctx = { file, dir: path.dirname(absPath), warn };
    for await (const row of rowsOf(format, absPath, file, warn)) {
      onRow();
      yield* await expandRow(row, ctx);
    }
  };
  const silent: Warn = () => {};
  const ids = new IdRegistry({ file, rows: () => expanded(silent) });
  const keep = options.filter ?? (() => true);
  let rows = 0;
  let count = 0;
  const warn: Warn = (message, line) => {
    warnings.push(`${formatPosition(line === undefined ? { file } : { file, line })}: ${message}`);
  };
  for await (const item of expanded(warn, () => rows++)) {
    await ids.add(item);
    if (!keep(item)) continue;
    count++;
    options.onItem?.(item);
  }
  if (rows === 0) warn('the manifest has no rows; nothing to do');
  return {
    file,
    rows,
    count,
    warnings,
    async *items() {
      for await (const item of expanded(silent)) {
        if (!keep(item)) continue;
        yield ids.has(item.id) ? item : appeared(item);
      }
    },
  };
}

/** An item that was not in the manifest when it was checked: rejected, with the reason. */
function appeared(item: Item): Item {
  return {
    ...item,
    rejection: {
      code: 'invalid_item',
      message: `${item.image}: appeared after the manifest was checked (a new file under a glob?); rerun to include it`,
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
  return { file, items, warnings: manifest.warnings, rows: manifest.rows };
}
