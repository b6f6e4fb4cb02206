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
