/**
 * Style keys against the service's list (`GET /v1/styles`). Pure functions: the caller fetches
 * the list; an unknown style is rejected before anything is submitted (docs/faults.md H.40), with a
 * suggestion so a typo costs the user one edit, not a lookup.
 */
import type { Item } from '../types.js';

/** Lower case, with runs of spaces, `_` and `-` made one `-`: `Mid_Century` and `mid-century` compare equal. */
function normalise(key: string): string {
  return key
    .trim()
    .toLowerCase()
    .replace(/[\s_-]+/g, '-');
}

/** Edit distance (insertions, deletions, substitutions), two rows of memory. */
function levenshtein(a: string, b: string): number {
  if (a === b) return 0;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  let curr = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    curr[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      curr[j] = Math.min((prev[j] ?? 0) + 1, (curr[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
    }
    [prev, curr] = [curr, prev];
  }
  return prev[b.length] ?? 0;
}

/**
 * The valid keys closest to `style`, best first: keys equal but for case and separators, then keys
 * one is a prefix of the other (`scandi` → `scandinavian`), then keys within a small edit
 * distance (a third of the length, at least 2). Ties go alphabetically so output is stable.
 *
 * @param max at most this many suggestions. @default 3
 */
export function suggestStyles(style: string, validKeys: readonly string[], max = 3): string[] {
  const wanted = normalise(style);
  if (wanted === '' || max <= 0) return [];
  const limit = Math.max(2, Math.floor(wanted.length / 3));
  const scored: { key: string; rank: number; distance: number }[] = [];
  for (const key of new Set(validKeys)) {
    const candidate = normalise(key);
    const distance = levenshtein(wanted, candidate);
    let rank: number;
    if (distance === 0) rank = 0;
    else if (candidate.startsWith(wanted) || wanted.startsWith(candidate)) rank = 1;
    else if (distance <= limit) rank = 2;
    else continue;
    scored.push({ key, rank, distance });
  }
  scored.sort((a, b) => a.rank - b.rank || a.distance - b.distance || (a.key < b.key ? -1 : 1));
  return scored.slice(0, max).map((s) => s.key);
}

/** `"a"`, `"a" or "b"`, `"a", "b" or "c"`. */
function quotedAlternatives(keys: readonly string[]): string {
  const quoted = keys.map((k) => JSON.stringify(k));
  if (quoted.length <= 1) return quoted.join('');
  return `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}

/**
 * Checks a change-style item's style against the service's keys. Returns the item unchanged when
 * the style is offered, when the item is not change-style, has no style or is already rejected, or
 * when `validKeys` is null (the list could not be understood: the service judges each style
 * then). Otherwise returns a copy with `rejection.code = 'unknown_style'` and a suggestion.
 */
export function checkStyle(item: Item, validKeys: ReadonlySet<string> | null): Item {
  if (validKeys === null || item.rejection || item.module !== 'change-style' || item.style === undefined) {
    return item;
  }
  if (validKeys.has(item.style)) return item;
  const suggestions = suggestStyles(item.style, [...validKeys]);
  let message = `style ${JSON.stringify(item.style)} is not offered by the service`;
  if (suggestions.length > 0) {
    message += `; did you mean ${quotedAlternatives(suggestions)}?`;
  } else if (validKeys.size > 0) {
    const some = [...validKeys].sort().slice(0, 10);
    message += ` (offered: ${some.join(', ')}${validKeys.size > some.length ? ', ...' : ''})`;
  }
  return { ...item, rejection: { code: 'unknown_style', message } };
}
