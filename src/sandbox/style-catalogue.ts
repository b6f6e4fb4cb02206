/**
 * The style catalogue of the sandbox and the shapes `GET /v1/styles` can answer in. The spec leaves
 * the response shape "not shown", so the sandbox can serve every shape a real service might pick,
 * letting tests prove the client copes with each (docs/faults.md H.40).
 */

/** Styles the sandbox accepts for change-style; keys are what manifests use. */
export const SANDBOX_STYLES: ReadonlyArray<{ key: string; name: string }> = Object.freeze([
  { key: 'scandinavian', name: 'Scandinavian' },
  { key: 'industrial', name: 'Industrial' },
  { key: 'japandi', name: 'Japandi' },
  { key: 'farmhouse', name: 'Farmhouse' },
  { key: 'modern', name: 'Modern' },
  { key: 'coastal', name: 'Coastal' },
  { key: 'mediterranean', name: 'Mediterranean' },
  { key: 'minimalist', name: 'Minimalist' },
]);

/** Shapes of the `GET /v1/styles` response body. */
export type StylesShape =
  /** `[{"key","name"}, ...]` */
  | 'objects'
  /** `["scandinavian", ...]` */
  | 'strings'
  /** `{"styles":[{"key","name"}, ...]}` (the default) */
  | 'wrapped-objects'
  /** `{"styles":["scandinavian", ...]}` */
  | 'wrapped-strings'
  /** `{"data":[{"key","name"}, ...]}` */
  | 'data'
  /** `{"items":[{"key","name"}, ...]}` */
  | 'items'
  /** A 200 with an object no client could read a list from. */
  | 'unrecognised'
  /** The endpoint does not exist: 404. */
  | 'missing';

/** Every {@link StylesShape}, for flag validation. */
export const STYLES_SHAPES: readonly StylesShape[] = [
  'objects',
  'strings',
  'wrapped-objects',
  'wrapped-strings',
  'data',
  'items',
  'unrecognised',
  'missing',
];

/** Whether `key` is one of {@link SANDBOX_STYLES}. */
export function isSandboxStyle(key: string): boolean {
  return SANDBOX_STYLES.some((s) => s.key === key);
}

/** The JSON body for a shape, or `null` for `missing` (the caller answers 404). */
export function stylesBody(shape: StylesShape): unknown {
  const objects = SANDBOX_STYLES.map((s) => ({ key: s.key, name: s.name }));
  const keys = SANDBOX_STYLES.map((s) => s.key);
  switch (shape) {
    case 'objects':
      return objects;
    case 'strings':
      return keys;
    case 'wrapped-objects':
      return { styles: objects };
    case 'wrapped-strings':
      return { styles: keys };
    case 'data':
      return { data: objects };
    case 'items':
      return { items: objects };
    case 'unrecognised':
      return { catalogue: { count: keys.length, note: 'ask your account manager' } };
    case 'missing':
      return null;
  }
}
