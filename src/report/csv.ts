import type { ReportItem } from '../types.js';

/** Columns of report.csv, in the order of docs/contract.md#report-csv. */
export const REPORT_CSV_COLUMNS = [
  'id',
  'image',
  'module',
  'style',
  'status',
  'job_id',
  'output',
  'sha256',
  'processing_time_ms',
  'submissions',
  'error_code',
  'error_message',
  // Additive (docs/contract.md#report-csv): what preflight did, steps joined by "; ".
  'preflight',
  // Additive: the review's score and flags (joined by "; "), empty when not reviewed.
  'review_score',
  'review_flags',
  // Additive: submissions sent again while an earlier one's outcome was unknown (possible duplicates).
  'ambiguous_resends',
] as const;

/** RFC 4180 quoting; also neutralises cells a spreadsheet would run as a formula. */
function cell(value: string | number | null): string {
  if (value === null) return '';
  let s = String(value);
  if (typeof value === 'string' && /^[=+@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** The header line of report.csv (CRLF line ends, as every row). */
export function csvHeader(): string {
  return `${REPORT_CSV_COLUMNS.join(',')}\r\n`;
}

/** One row of report.csv. */
export function csvRow(item: ReportItem): string {
  // One string built cell by cell: no array of cells per row (a report of 10^6 rows makes 10^6 of them).
  return (
    `${cell(item.id)},${cell(item.image)},${cell(item.module)},${cell(item.style)},${cell(item.status)},` +
    `${cell(item.job_id)},${cell(item.output)},${cell(item.sha256)},${cell(item.processing_time_ms)},` +
    `${cell(item.submissions)},${cell(item.error?.code ?? null)},${cell(item.error?.message ?? null)},` +
    `${cell(item.preflight.join('; '))},${cell(item.review?.score ?? null)},` +
    `${cell(item.review ? item.review.flags.join('; ') : null)},${cell(item.ambiguous_resends)}\r\n`
  );
}
