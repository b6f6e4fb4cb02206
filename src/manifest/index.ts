/**
 * The manifest stage: reads a `.csv`, `.json` or `.jsonl`/`.ndjson` manifest, validates each row,
 * expands globs and style lists into items and checks item ids are unique. Everything that makes
 * the manifest unreadable is a {@link ManifestError} (exit 2, nothing submitted); a problem of one
 * row only rejects that row's items.
 */
import path from 'node:path';
import { formatPosition, ManifestError } from '../errors.js';
import type { Item } from '../types.js';
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
 * same result file on macOS's default file system, so they are duplicates too.
 */
class IdRegistry {
  private readonly seen = new Map<string, Item>();

  constructor(private readonly file: string) {}

  add(item: Item): void {
    const key = item.id.toLowerCase();
    const first = this.seen.get(key);
    if (first === undefined) {
      this.seen.set(key, item);
      return;
    }
    const lines = `rows at lines ${first.source.line} and ${item.source.line}`;
    const caseNote = first.id === item.id ? '' : ` (same as "${first.id}" when case is ignored)`;
    // Two items of one row (a glob matching k1.jpg and k1.png) need their images to be told apart.
    const images =
      first.source.line === item.source.line || first.image !== item.image
        ? `; images ${JSON.stringify(first.image)} and ${JSON.stringify(item.image)}`
        : '';
    throw new ManifestError(
      { file: this.file, line: item.source.line },
      `duplicate item id "${item.id}"${caseNote}: ${lines}${images}; give one of them another id`,
      { code: 'duplicate_id' },
    );
  }
}

/**
 * Reads the manifest `file` (resolved against `options.cwd`) and expands it into items.
 * CSV and JSONL are streamed; a JSON document is read whole.
 *
 * @throws ManifestError when the file cannot be read or parsed, lacks an `image` column, has a
 *   duplicate header, or two items share an id (the message names file and line).
 */
export async function readManifest(file: string, options: ReadManifestOptions = {}): Promise<ManifestResult> {
  const format = formatOf(file);
  if (format === undefined) {
    throw new ManifestError(
      { file },
      `unsupported manifest type ${JSON.stringify(path.extname(file) || '(no extension)')}; use .csv, .json, .jsonl or .ndjson`,
    );
  }
  const absPath = path.resolve(options.cwd ?? process.cwd(), file);
  const warnings: string[] = [];
  const warn: Warn = (message, line) => {
    warnings.push(`${formatPosition(line === undefined ? { file } : { file, line })}: ${message}`);
  };
  const ctx = { file, dir: path.dirname(absPath), warn };
  const ids = new IdRegistry(file);
  const items: Item[] = [];
  let rows = 0;
  for await (const row of rowsOf(format, absPath, file, warn)) {
    rows++;
    for (const item of await expandRow(row, ctx)) {
      ids.add(item);
      items.push(item);
    }
  }
  if (rows === 0) warn('the manifest has no rows; nothing to do');
  return { file, items, warnings, rows };
}
