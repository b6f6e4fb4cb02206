/** Small pure helpers the HTML report's header uses; kept apart so they are unit-testable. */

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * JSON for an inline `<script type="application/json">`: `<` becomes `\u003c` so that no value
 * (a crafted id, a service message) can close the script element or open a comment; JSON.parse
 * reads the escape back as `<`. U+2028/9 are escaped too, for old parsers that treat them as newlines.
 */
export function inlineJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** Nearest-rank percentile (p in 0..100) of the values; null when there are none. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? null;
}

/** A duration for people: `850 ms`, `12.3 s`, `3 min 04 s`, `1 h 02 min`; `—` when unknown. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const totalSeconds = Math.round(s);
  if (totalSeconds < 3600) {
    return `${Math.floor(totalSeconds / 60)} min ${String(totalSeconds % 60).padStart(2, '0')} s`;
  }
  const totalMinutes = Math.round(totalSeconds / 60);
  return `${Math.floor(totalMinutes / 60)} h ${String(totalMinutes % 60).padStart(2, '0')} min`;
}

/**
 * An ISO 8601 timestamp shown as `2026-11-22 04:39:24 +00:00`, keeping the run's own offset
 * (re-rendering in the viewer's zone would disagree with run.log). Anything else is shown as given.
 */
export function formatTimestamp(iso: string): string {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/.exec(iso);
  if (!m) return iso;
  const zone = m[3] === undefined ? '' : m[3] === 'Z' ? ' UTC' : ` ${m[3]}`;
  return `${m[1]} ${m[2]}${zone}`;
}

/** An integer with thousands separators, fixed to en-US so reports read the same on every machine. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}
