/**
 * JSON and JSONL/NDJSON manifests. A JSON document is read whole (one array, items are small);
 * JSONL is streamed line by line so a large file is never held in memory.
 */
import { createReadStream } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { ManifestError } from '../errors.js';
import { describeJsonError, lineColumnAt, locateItems } from './json-text.js';
import {
  type Field,
  IMAGE_NAMES,
  isField,
  type RawRow,
  unusedImageName,
  type Warn,
  withImageField,
} from './row.js';

/** `an array`, `a number`, `null`: how a JSON value's type reads in a message. */
export function jsonTypeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Warns once per unknown field name across the manifest, not once per row. */
function unknownFieldWarner(warn: Warn): (name: string, line: number) => void {
  const warned = new Set<string>();
  return (name, line) => {
    if (warned.has(name)) return;
    warned.add(name);
    warn(
      (IMAGE_NAMES as readonly string[]).includes(name)
        ? unusedImageName('field', name)
        : `unknown field "${name}" is ignored (known: image, module, style, prompt, configuration, id)`,
      line,
    );
  };
}

/** The known, non-null fields of `object` (JSON `null` counts as absent). */
function pickFields(
  object: Record<string, unknown>,
  line: number,
  onUnknown: (name: string, line: number) => void,
): RawRow['fields'] {
  const fields: RawRow['fields'] = {};
  for (const [name, value] of Object.entries(object)) {
    if (!isField(name)) {
      // An image name other than the one taken (see withImageField) is warned about as unused.
      onUnknown(name, line);
      continue;
    }
    if (value !== null && value !== undefined) fields[name] = value;
  }
  return fields;
}

async function readText(absPath: string, file: string): Promise<string> {
  try {
    return await readFile(absPath, 'utf8');
  } catch (error) {
    throw new ManifestError({ file }, `cannot read the manifest: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/**
 * Reads a `.json` manifest: an array of items, or `{"defaults": {...}, "items": [...]}` where each
 * default applies to every item that does not set that field itself (an item's explicit `null`
 * unsets the default). Bad JSON → ManifestError with the parser's line and column.
 */
export async function readJsonRows(absPath: string, file: string, warn: Warn): Promise<RawRow[]> {
  // A UTF-8 BOM is legal at the start of a file but not in JSON.parse's input.
  const text = (await readText(absPath, file)).replace(/^\uFEFF/, '');
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    const problem = describeJsonError(text, error);
    throw new ManifestError({ file, ...(problem.position ?? {}) }, `not valid JSON: ${problem.message}`, {
      cause: error,
    });
  }

  let list: unknown[];
  let defaults: Record<string, unknown> = {};
  const onUnknown = unknownFieldWarner(warn);
  if (Array.isArray(document)) {
    list = document;
  } else if (isPlainObject(document) && Array.isArray(document.items)) {
    list = document.items;
    for (const key of Object.keys(document)) {
      if (key !== 'items' && key !== 'defaults') warn(`unknown top-level key "${key}" is ignored`, 1);
    }
    if (document.defaults !== undefined && document.defaults !== null) {
      if (!isPlainObject(document.defaults)) {
        throw new ManifestError(
          { file, line: 1 },
          `"defaults" must be an object of item fields (got ${jsonTypeName(document.defaults)})`,
        );
      }
      defaults = document.defaults;
    }
  } else {
    throw new ManifestError(
      { file, line: 1 },
      `expected an array of items or {"defaults": {...}, "items": [...]} (got ${jsonTypeName(document)}${isPlainObject(document) ? ' without an "items" array' : ''})`,
    );
  }

  const starts = locateItems(text);
  defaults = withImageField(defaults);
  const defaultFields = pickFields(defaults, 1, onUnknown);
  return list.map((entry, index) => {
    const offset = starts[index];
    const line = offset === undefined ? 1 : lineColumnAt(text, offset).line;
    if (!isPlainObject(entry)) {
      throw new ManifestError(
        { file, line },
        `item ${index + 1} is ${jsonTypeName(entry)}; every item must be an object like {"image": "..."}`,
      );
    }
    // The item's own keys win, including an explicit null (which removes the default).
    // `image_url`/`image_link` are taken as `image` per object, before the defaults apply.
    const own = withImageField(entry);
    const merged: Record<string, unknown> = { ...defaults, ...own };
    const fields = pickFields(merged, line, onUnknown);
    const defaulted: Field[] = [];
    for (const name of Object.keys(defaultFields) as Field[]) {
      if (!(name in own)) defaulted.push(name);
      else if (own[name] === null || own[name] === undefined) delete fields[name];
    }
    return { line, fields, ...(defaulted.length > 0 ? { defaulted } : {}) };
  });
}

/**
 * Streams a `.jsonl`/`.ndjson` manifest: one item object per line, blank lines skipped.
 * A line that is not valid JSON or not an object → ManifestError naming that line.
 */
export async function* readJsonlRows(absPath: string, file: string, warn: Warn): AsyncGenerator<RawRow> {
  // Opening first turns a missing file into a manifest error before any streaming starts.
  try {
    await (await open(absPath, 'r')).close();
  } catch (error) {
    throw new ManifestError({ file }, `cannot read the manifest: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const stream = createReadStream(absPath, { encoding: 'utf8' });
  const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  const onUnknown = unknownFieldWarner(warn);
  let line = 0;
  try {
    for await (const raw of lines) {
      line++;
      const text = line === 1 ? raw.replace(/^\uFEFF/, '') : raw;
      if (text.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        const problem = describeJsonError(text, error);
        throw new ManifestError(
          { file, line, ...(problem.position ? { column: problem.position.column } : {}) },
          `not valid JSON: ${problem.message}`,
          { cause: error },
        );
      }
      if (!isPlainObject(value)) {
        throw new ManifestError(
          { file, line },
          `the line is ${jsonTypeName(value)}; every line must be one item object like {"image": "..."}`,
        );
      }
      yield { line, fields: pickFields(withImageField(value), line, onUnknown) };
    }
  } finally {
    lines.close();
    stream.destroy();
  }
}
