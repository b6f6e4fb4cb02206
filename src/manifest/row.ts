/** What every manifest reader yields: one row as written, before validation and expansion. */

/** The fields a manifest row may set (contract, section Manifest). */
export const FIELDS = ['image', 'module', 'style', 'prompt', 'configuration', 'id'] as const;
export type Field = (typeof FIELDS)[number];

/** Whether `name` is one of {@link FIELDS}. */
export function isField(name: string): name is Field {
  return (FIELDS as readonly string[]).includes(name);
}

/**
 * One manifest row. `fields` holds only the fields the row sets: empty CSV cells and JSON `null`
 * are left out, so "absent" has one representation. Values are strings from CSV and any JSON
 * value from JSON/JSONL; the expander checks their types.
 */
export interface RawRow {
  /** 1-based line the row starts on. */
  line: number;
  fields: Partial<Record<Field, unknown>>;
  /** The fields whose value came from a JSON manifest's `defaults`, not from the row itself. */
  defaulted?: readonly Field[];
}

/** Reports a problem that does not stop the run; `line` when it belongs to one. */
export type Warn = (message: string, line?: number) => void;

/**
 * The names an image column may have, by precedence: `image`, else `image_url`, else `image_link`
 * (Google Merchant feeds), so that a product feed is a manifest as it is (issue 32).
 */
export const IMAGE_NAMES = ['image', 'image_url', 'image_link'] as const;

/** The three accepted image column names, for messages. */
export const IMAGE_NAMES_TEXT = IMAGE_NAMES.map((name) => `"${name}"`).join(', ');

/** Which of `names` is taken as `image` (see {@link IMAGE_NAMES}), or undefined when none is there. */
export function imageNameOf(has: (name: string) => boolean): string | undefined {
  return IMAGE_NAMES.find((name) => has(name));
}

/**
 * The warning for an image column (CSV) or field (JSON) that one of higher precedence makes unused;
 * `used` names the one taken when it is known for the whole manifest (a CSV header).
 */
export function unusedImageName(what: 'column' | 'field', name: string, used?: string): string {
  const taken = used === undefined ? 'the item has its image already' : `"${used}" is the image`;
  return `${what} "${name}" is ignored: ${taken} (precedence: image, image_url, image_link)`;
}

/**
 * A JSON object with its image under `image`: its own `image` when set (not null), else its
 * `image_url`, else its `image_link`, which is then removed. Other image names stay, to be warned
 * about as unused. Per object, since the keys of JSON items may differ from one to the next.
 */
export function withImageField(object: Record<string, unknown>): Record<string, unknown> {
  const set = (name: string) => object[name] !== undefined && object[name] !== null;
  const name = imageNameOf(set);
  if (name === undefined || name === 'image') return object;
  const { [name]: value, ...rest } = object;
  return { ...rest, image: value };
}
