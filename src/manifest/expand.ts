/**
 * Validates one manifest row and expands it into items: one per matched image per style.
 * Problems of a single row do not stop the manifest: the row's items carry a `rejection` and are
 * reported, the other rows go on. Only structural problems (in the readers) are ManifestErrors.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import fg from 'fast-glob';
import { type Item, MODULES, type ModuleId } from '../types.js';
import { safeId } from '../util/ids.js';
import { jsonTypeName } from './json.js';
import { formatJsonProblem, parseJson } from './json-text.js';
import type { Field, RawRow, Warn } from './row.js';

type Rejection = NonNullable<Item['rejection']>;

/** What {@link expandRow} needs to know about the manifest. */
export interface ExpandContext {
  /** The manifest as given, for `Item.source.file`. */
  file: string;
  /** Absolute folder of the manifest: images resolve against it. */
  dir: string;
  warn: Warn;
}

/** A row's fields after type checks; `rejection` holds the first problem found. */
interface CheckedRow {
  image?: string;
  module: string;
  styles: string[];
  prompt?: string;
  configuration?: Record<string, unknown>;
  id?: string;
  rejection?: Rejection;
}

/** One image a row names: a plain path, one glob match, or a glob that matched nothing. */
interface ImageRef {
  /** As the report shows it: relative to the manifest folder with `/`, or absolute as given. */
  image: string;
  imagePath: string;
  /** The base of the item id before the style suffix, not yet made safe. */
  base: string;
}

const isModule = (value: string): value is ModuleId => (MODULES as readonly string[]).includes(value);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Splits `a|b` or takes a JSON array; returns the list or a message saying what is wrong. */
function parseStyles(value: unknown): string[] | string {
  let parts: unknown[];
  if (typeof value === 'string') parts = value.split('|');
  else if (Array.isArray(value)) parts = value;
  else return `style must be a style key or a list of keys (got ${jsonTypeName(value)})`;
  const styles: string[] = [];
  for (const [index, part] of parts.entries()) {
    if (typeof part !== 'string') {
      return `style must be a style key or a list of keys (entry ${index + 1} is ${jsonTypeName(part)})`;
    }
    const key = part.trim();
    if (key !== '') styles.push(key);
  }
  return styles;
}

/** The one module a field is for; the other fields are for every module. */
const FIELD_MODULE: Partial<Record<Field, ModuleId>> = {
  style: 'change-style',
  prompt: 'change-style',
  configuration: 'kitchen-configurator',
};

/**
 * The row's fields without the defaults its module does not take: a default `style` in a mixed
 * manifest is for its change-style rows, not a fault of its kitchen-configurator rows
 * (docs/contract.md#manifest). A field the row sets itself is kept, and refused when it does not fit.
 */
function applicableFields(row: RawRow, module: string): RawRow['fields'] {
  if (!row.defaulted || !isModule(module)) return row.fields;
  const fields = { ...row.fields };
  for (const name of row.defaulted) {
    const only = FIELD_MODULE[name];
    if (only !== undefined && only !== module) delete fields[name];
  }
  return fields;
}

/** Type-checks a row's fields against the manifest format (docs/contract.md#manifest). */
function checkRow(row: RawRow, warn: Warn): CheckedRow {
  let f = row.fields;
  const out: CheckedRow = { module: 'change-style', styles: [] };
  // `field`: the field at fault; when its value came from `defaults` the message says so.
  const reject = (code: Rejection['code'], message: string, field?: Field) => {
    const origin = field && row.defaulted?.includes(field) ? `; the ${field} came from "defaults"` : '';
    out.rejection ??= { code, message: `${message}${origin}` };
  };

  if (typeof f.image === 'string' && f.image.trim() !== '') out.image = f.image.trim();
  else if (f.image === undefined || typeof f.image === 'string') reject('invalid_item', 'image is missing');
  else reject('invalid_item', `image must be a path or glob (got ${jsonTypeName(f.image)})`, 'image');

  if (typeof f.module === 'string' && f.module.trim() !== '') out.module = f.module.trim();
  else if (f.module !== undefined && typeof f.module !== 'string') out.module = JSON.stringify(f.module);
  if (!isModule(out.module)) {
    reject(
      'invalid_item',
      `module ${JSON.stringify(out.module)} is unknown; use one of ${MODULES.join(', ')}`,
      'module',
    );
  }
  f = applicableFields(row, out.module);

  if (typeof f.id === 'string' || typeof f.id === 'number') {
    const id = String(f.id).trim();
    if (id !== '') out.id = id;
  } else if (f.id !== undefined) {
    reject('invalid_item', `id must be a string (got ${jsonTypeName(f.id)})`, 'id');
  }

  if (f.style !== undefined) {
    const styles = parseStyles(f.style);
    if (typeof styles === 'string') {
      reject('invalid_item', styles, 'style');
    } else {
      const unique = [...new Set(styles)];
      if (unique.length < styles.length)
        warn('a style is listed twice in this row; it is used once', row.line);
      out.styles = unique;
    }
  }
  if (out.module === 'change-style' && out.styles.length === 0 && f.style === undefined) {
    reject('invalid_item', 'style is missing; module change-style needs a style key');
  } else if (out.module === 'change-style' && out.styles.length === 0 && !out.rejection) {
    reject('invalid_item', 'style is empty; module change-style needs a style key');
  }
  if (out.module === 'kitchen-configurator' && out.styles.length > 0) {
    reject(
      'invalid_item',
      'style is for module change-style only; kitchen-configurator takes no style',
      'module',
    );
  }

  if (f.prompt !== undefined) {
    if (typeof f.prompt !== 'string')
      reject('invalid_item', `prompt must be text (got ${jsonTypeName(f.prompt)})`, 'prompt');
    else if (out.module === 'kitchen-configurator') {
      reject(
        'invalid_item',
        'prompt is for module change-style only; kitchen-configurator takes no prompt',
        'module',
      );
    } else out.prompt = f.prompt;
  }

  if (f.configuration !== undefined) {
    if (out.module === 'change-style') {
      reject(
        'invalid_item',
        'configuration is for module kitchen-configurator only; change-style takes no configuration',
        'module',
      );
    }
    let value: unknown = f.configuration;
    let parsed = true;
    // In CSV (and, for convenience, in JSON) the object may come as JSON text.
    if (typeof value === 'string') {
      const result = parseJson(value);
      if (result.ok) value = result.value;
      else {
        parsed = false;
        reject(
          'invalid_configuration',
          `configuration is not valid JSON: ${formatJsonProblem(result.problem)}`,
          'configuration',
        );
      }
    }
    if (parsed) {
      if (isPlainObject(value)) {
        if (out.module !== 'change-style') out.configuration = value;
      } else {
        reject(
          'invalid_configuration',
          `configuration is not a JSON object (got ${jsonTypeName(value)})`,
          'configuration',
        );
      }
    }
  }
  return out;
}

/** `images/k1.jpg` for a path under the manifest folder; absolute paths stay as given. */
function displayPath(dir: string, spec: string, absolute: string): string {
  if (path.isAbsolute(spec)) return spec;
  return path.relative(dir, absolute).split(path.sep).join('/');
}

/** The file name without its extension: the default item id. */
function stem(file: string): string {
  return path.parse(file).name;
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

/**
 * The images a row's `image` names. For a glob, every matching file (sorted, so ids and order are
 * the same on every run); the id base is the file's name, prefixed `<id>-` when the row has an id.
 * We use the file name for every glob match, also when only one file matches, so that adding a
 * file to the folder later does not rename the items already there (resume keys on the id). Files
 * of one glob that share a name but not the extension (`sku123.jpg`, `sku123.png`: a marketing
 * folder) take the extension too (`sku123-jpg`, `sku123-png`; docs/contract.md#ids), since a glob
 * row cannot give them ids of their own.
 */
async function resolveImages(
  checked: CheckedRow,
  row: RawRow,
  ctx: ExpandContext,
): Promise<{ images: ImageRef[]; notFound?: string }> {
  const spec = checked.image;
  if (spec === undefined) {
    return { images: [{ image: '', imagePath: '', base: checked.id ?? `line-${row.line}` }] };
  }
  const plain = (): ImageRef => {
    const imagePath = path.resolve(ctx.dir, spec);
    return { image: displayPath(ctx.dir, spec, imagePath), imagePath, base: checked.id ?? stem(spec) };
  };
  if (!fg.isDynamicPattern(spec)) return { images: [plain()] };

  const matches = await fg(spec, { cwd: ctx.dir, onlyFiles: true, unique: true, followSymbolicLinks: true });
  matches.sort();
  if (matches.length === 0) {
    // A file literally named like a pattern (`k[1].jpg`) is a path, not an empty glob.
    if (await exists(path.resolve(ctx.dir, spec))) return { images: [plain()] };
    return {
      images: [{ image: spec, imagePath: '', base: checked.id ?? spec }],
      notFound: `no file matches the glob ${JSON.stringify(spec)} (relative to ${ctx.dir})`,
    };
  }
  // Case-insensitively: `K1.jpg` and `k1.png` name the same result file on macOS and Windows.
  // Only the extension can tell such files apart: two `k1.jpg` in different folders stay a duplicate.
  const counts = new Map<string, number>();
  const count = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
  const key = (match: string) => stem(match).toLowerCase();
  const withExt = (match: string) => `${key(match)}\0${path.extname(match).toLowerCase()}`;
  for (const match of matches) {
    count(key(match));
    count(withExt(match));
  }
  return {
    images: matches.map((match) => {
      const imagePath = path.resolve(ctx.dir, match);
      const shared = (counts.get(key(match)) ?? 0) > 1 && counts.get(withExt(match)) === 1;
      const ext = path.extname(match).slice(1);
      const name = shared && ext ? `${stem(match)}-${ext}` : stem(match);
      return {
        image: displayPath(ctx.dir, match, imagePath),
        imagePath,
        base: checked.id === undefined ? name : `${checked.id}-${name}`,
      };
    }),
  };
}

/**
 * Validates `row` and expands it: one item per image per style (change-style) or per image
 * (kitchen-configurator). Rejected rows still expand as far as their fields allow, so every
 * intended item shows in the report under its id and takes part in the duplicate check.
 * Plain paths are not checked for existence here (preflight does that); a glob that matches
 * nothing yields `file_not_found` items.
 */
export async function expandRow(row: RawRow, ctx: ExpandContext): Promise<Item[]> {
  const checked = checkRow(row, ctx.warn);
  const { images, notFound } = await resolveImages(checked, row, ctx);
  const rejection: Rejection | undefined =
    checked.rejection ?? (notFound === undefined ? undefined : { code: 'file_not_found', message: notFound });
  const withStyle = checked.module !== 'kitchen-configurator' && checked.styles.length > 0;
  const styles: (string | undefined)[] = withStyle ? checked.styles : [undefined];

  const items: Item[] = [];
  for (const ref of images) {
    for (const style of styles) {
      const item: Item = {
        id: safeId(style === undefined ? ref.base : `${ref.base}__${style}`),
        image: ref.image,
        imagePath: ref.imagePath,
        module: checked.module,
        source: { file: ctx.file, line: row.line },
      };
      if (style !== undefined) item.style = style;
      if (checked.prompt !== undefined) item.prompt = checked.prompt;
      if (checked.configuration !== undefined) item.configuration = checked.configuration;
      if (rejection) item.rejection = rejection;
      items.push(item);
    }
  }
  return items;
}
