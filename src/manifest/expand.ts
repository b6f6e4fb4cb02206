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
import { globIdBases } from './glob-ids.js';
import { jsonTypeName } from './json.js';
import { formatJsonProblem, parseJson } from './json-text.js';
import {
  type ImageRef,
  type ImageResolution,
  type ManifestPlace,
  remoteImages,
  type S3GlobLister,
} from './remote-images.js';
import type { Field, RawRow, Warn } from './row.js';

type Rejection = NonNullable<Item['rejection']>;

/** What {@link expandRow} needs to know about the manifest. */
export interface ExpandContext {
  /** The manifest as shown (a URL redacted), for `Item.source.file`. */
  file: string;
  /** Where the manifest is: relative images resolve against its folder, URL or S3 prefix. */
  place: ManifestPlace;
  /** Lists the manifest's S3 globs (one client, listings kept for the second reading). */
  s3: S3GlobLister;
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

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

/**
 * The images a row's `image` names: a URL or an S3 reference or glob (remote-images.ts), else a
 * local path or glob against the manifest's folder. For a glob, every matching file (sorted, so ids
 * and order are the same on every run), named by {@link globIdBases}.
 */
async function resolveImages(checked: CheckedRow, row: RawRow, ctx: ExpandContext): Promise<ImageResolution> {
  const spec = checked.image;
  if (spec === undefined) {
    return { images: [{ image: '', imagePath: '', base: checked.id ?? `line-${row.line}` }] };
  }
  const remote = await remoteImages(spec, { id: checked.id, line: row.line, place: ctx.place, s3: ctx.s3 });
  if (remote) return remote;
  // Only an absolute path reaches here from a remote manifest: it resolves against nothing.
  const dir = ctx.place.kind === 'local' ? ctx.place.dir : path.parse(spec).root;
  const plain = (): ImageRef => {
    const imagePath = path.resolve(dir, spec);
    return { image: displayPath(dir, spec, imagePath), imagePath, base: checked.id ?? path.parse(spec).name };
  };
  if (!fg.isDynamicPattern(spec)) return { images: [plain()] };

  const matches = await fg(spec, { cwd: dir, onlyFiles: true, unique: true, followSymbolicLinks: true });
  matches.sort();
  if (matches.length === 0) {
    // A file literally named like a pattern (`k[1].jpg`) is a path, not an empty glob.
    if (await exists(path.resolve(dir, spec))) return { images: [plain()] };
    return {
      images: [{ image: spec, imagePath: '', base: checked.id ?? spec }],
      rejection: {
        code: 'file_not_found',
        message: `no file matches the glob ${JSON.stringify(spec)} (relative to ${dir})`,
      },
    };
  }
  const bases = globIdBases(matches, checked.id);
  return {
    images: matches.map((match, index) => {
      const imagePath = path.resolve(dir, match);
      return { image: displayPath(dir, match, imagePath), imagePath, base: bases[index] ?? match };
    }),
  };
}

/**
 * Validates `row` and expands it: one item per image per style (change-style) or per image
 * (kitchen-configurator). Rejected rows still expand as far as their fields allow, so every
 * intended item shows in the report under its id and takes part in the duplicate check.
 * Plain paths, URLs and S3 keys are not checked for existence here (preflight does that); a glob,
 * local or S3, that matches nothing yields `file_not_found` items, and an S3 glob that cannot be
 * listed yields items rejected with the listing's code.
 */
export async function expandRow(row: RawRow, ctx: ExpandContext): Promise<Item[]> {
  const checked = checkRow(row, ctx.warn);
  const resolved = await resolveImages(checked, row, ctx);
  const { images } = resolved;
  const rejection: Rejection | undefined = checked.rejection ?? resolved.rejection;
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
