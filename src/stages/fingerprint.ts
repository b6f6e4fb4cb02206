import type { Item } from '../types.js';
import { sha256 } from '../util/fs.js';

/** JSON with object keys sorted at every depth, so equal configurations hash equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * An item's identity for resume: what determines its result (module, style, prompt, configuration
 * and the source image's bytes). A changed row or image gives a new fingerprint, so the item is new.
 */
export function fingerprint(item: Item, sourceSha256: string | null): string {
  return sha256(
    canonicalJson({
      module: item.module,
      style: item.style ?? null,
      prompt: item.prompt ?? null,
      configuration: item.configuration ?? null,
      image: sourceSha256,
    }),
  ).slice(0, 32);
}
