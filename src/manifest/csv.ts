/**
 * Streams a CSV manifest (docs/faults.md section G, measured with csv-parse 7.0.3). The file is never held
 * whole: records are parsed from a read stream and yielded one at a time.
 *
 * Records are parsed as arrays, not objects, because csv-parse's `columns: true` silently keeps
 * the last of two equal header names (case 36); we check the header ourselves.
 */
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import { CsvError, parse } from 'csv-parse';
import { ManifestError } from '../errors.js';
import {
  type Field,
  IMAGE_NAMES,
  IMAGE_NAMES_TEXT,
  imageNameOf,
  isField,
  type RawRow,
  unusedImageName,
  type Warn,
} from './row.js';

/** Line breaks inside a record's (quoted) fields, counted the way a text editor counts lines. */
function lineBreaks(record: readonly string[]): { real: number; crlf: number } {
  let real = 0;
  let crlf = 0;
  for (const field of record) {
    if (!field.includes('\n') && !field.includes('\r')) continue;
    real += field.match(/\r\n|\r|\n/g)?.length ?? 0;
    crlf += field.match(/\r\n/g)?.length ?? 0;
  }
  return { real, crlf };
}

/**
 * Tracks true line numbers. csv-parse's `info.lines` is the line a record *ends* on, but inside a
 * quoted field it counts `\r\n` as two lines (measured: a record spanning lines 2-3 of a CRLF file
 * reports 4, and every later record is off by one more per such break). We subtract that drift.
 */
class LineTracker {
  private drift = 0;
  /** True end line of the last record, and csv-parse's empty-line count at that point. */
  private lastEnd = 0;
  private lastEmpty = 0;

  /** The true line `record` starts on. */
  startOf(record: readonly string[], info: { lines: number; empty_lines: number }): number {
    const breaks = lineBreaks(record);
    this.drift += breaks.crlf;
    this.lastEnd = info.lines - this.drift;
    this.lastEmpty = info.empty_lines;
    return this.lastEnd - breaks.real;
  }

  /** The true line of a position csv-parse reports while inside the next record. */
  current(parserLine: number): number {
    return Math.max(1, parserLine - this.drift);
  }

  /** The line the record being parsed started on, given csv-parse's empty-line count now. */
  nextRecordStart(emptyLines: number): number {
    return this.lastEnd + 1 + Math.max(0, emptyLines - this.lastEmpty);
  }
}

/** Turns a csv-parse error into a ManifestError naming the line (and field, when known). */
function csvError(file: string, error: CsvError, lines: LineTracker, header: readonly string[] | null) {
  const e = error as CsvError & { lines?: number; empty_lines?: number; column?: number | string };
  const fieldIndex = typeof e.column === 'number' ? e.column : undefined;
  const fieldName = fieldIndex !== undefined ? header?.[fieldIndex] : undefined;
  const where =
    fieldIndex === undefined ? '' : ` in field ${fieldIndex + 1}${fieldName ? ` (${fieldName})` : ''}`;
  switch (e.code) {
    case 'CSV_QUOTE_NOT_CLOSED':
      // csv-parse reports the last line of the file; the user needs the line where the quote opened.
      return new ManifestError(
        { file, line: lines.nextRecordStart(e.empty_lines ?? 0) },
        'bad CSV quoting: a quoted field in the row starting here is never closed (a missing `"`?)',
        { cause: error },
      );
    case 'INVALID_OPENING_QUOTE':
      return new ManifestError(
        { file, line: lines.current(e.lines ?? 0) },
        `bad CSV quoting: a \`"\` inside an unquoted value${where}; quote the whole value and double the quotes inside it`,
        { cause: error },
      );
    case 'CSV_INVALID_CLOSING_QUOTE':
      return new ManifestError(
        { file, line: lines.current(e.lines ?? 0) },
        `bad CSV quoting: text follows a closing \`"\`${where}; quote the whole value and double the quotes inside it`,
        { cause: error },
      );
    default:
      return new ManifestError(
        { file, line: lines.current(e.lines ?? 0) },
        `cannot parse CSV: ${e.message}`,
        {
          cause: error,
        },
      );
  }
}

/**
 * Checks the header row: an image column (`image`, else `image_url`, else `image_link`), no name
 * twice; unknown names, and image columns of lower precedence, are warned about and ignored.
 */
function readHeader(file: string, line: number, record: readonly string[], warn: Warn): (Field | null)[] {
  const columns: (Field | null)[] = [];
  const seen = new Map<string, number>();
  const names = record.map((raw) => raw.trim().toLowerCase());
  const imageName = imageNameOf((name) => names.includes(name));
  record.forEach((raw, index) => {
    const name = names[index] ?? '';
    if (name === '') {
      warn(`column ${index + 1} has no name in the header; its values are ignored`, line);
      columns.push(null);
      return;
    }
    const first = seen.get(name);
    if (first !== undefined) {
      throw new ManifestError(
        { file, line },
        `duplicate column "${name}" in the header (columns ${first + 1} and ${index + 1})`,
      );
    }
    seen.set(name, index);
    if (name === imageName) {
      columns.push('image');
    } else if (imageName !== undefined && (IMAGE_NAMES as readonly string[]).includes(name)) {
      warn(unusedImageName('column', raw.trim(), imageName), line);
      columns.push(null);
    } else if (isField(name)) {
      columns.push(name);
    } else {
      warn(
        `unknown column "${raw.trim()}" is ignored (known: image, module, style, prompt, configuration, id)`,
        line,
      );
      columns.push(null);
    }
  });
  if (imageName === undefined) {
    throw new ManifestError(
      { file, line },
      `the header has no "image" column (accepted: ${IMAGE_NAMES_TEXT})`,
    );
  }
  return columns;
}

/**
 * Yields the data rows of the CSV manifest at `absPath` (`file` is the name errors show).
 * Throws ManifestError for an empty file, a bad header, bad quoting or a row whose field count
 * differs from the header's.
 */
export async function* readCsvRows(absPath: string, file: string, warn: Warn): AsyncGenerator<RawRow> {
  let handle: FileHandle;
  try {
    handle = await open(absPath, 'r');
  } catch (error) {
    throw new ManifestError({ file }, `cannot read the manifest: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const stream = handle.createReadStream();
  const lines = new LineTracker();
  let headerNames: string[] | null = null;
  /** Start lines of records parsed but not yet consumed, in order. */
  const pendingLines: number[] = [];
  const parser = parse({
    bom: true,
    skip_empty_lines: true,
    // We check field counts ourselves so the error names the row's true first line.
    relax_column_count: true,
    // Line bookkeeping runs here, synchronously as each record is parsed: when csv-parse then fails
    // later in the same chunk, the stream drops records still buffered, and the iterator below
    // would never see them. The error's line needs them counted.
    on_record: (record, info) => {
      pendingLines.push(lines.startOf(record, info));
      headerNames ??= record.map((n) => n.trim());
      return record;
    },
  });
  stream.on('error', (error) => parser.destroy(error));
  stream.pipe(parser);

  let header: (Field | null)[] | null = null;
  try {
    for await (const chunk of parser) {
      const record = chunk as string[];
      const line = pendingLines.shift() ?? 0;
      if (header === null) {
        header = readHeader(file, line, record, warn);
        continue;
      }
      if (record.length !== header.length) {
        throw new ManifestError(
          { file, line },
          `the row has ${record.length} field${record.length === 1 ? '' : 's'}, the header has ${header.length} (a missing or extra comma, or a value with a comma that needs quotes?)`,
        );
      }
      const fields: RawRow['fields'] = {};
      record.forEach((value, index) => {
        const name = header?.[index];
        const trimmed = value.trim();
        // An empty cell means the field is absent, so defaults (module) apply.
        if (name && trimmed !== '') fields[name] = trimmed;
      });
      yield { line, fields };
    }
  } catch (error) {
    if (error instanceof CsvError) throw csvError(file, error, lines, headerNames);
    if (error instanceof ManifestError) throw error;
    throw new ManifestError({ file }, `cannot read the manifest: ${(error as Error).message}`, {
      cause: error,
    });
  } finally {
    stream.destroy();
    await handle.close().catch(() => {});
  }
  if (header === null) {
    throw new ManifestError(
      { file, line: 1 },
      'the CSV file is empty: expected a header row with an "image" column (or "image_url", "image_link")',
    );
  }
}
