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
  return `${[
    item.id,
    item.image,
    item.module,
    item.style,
    item.status,
    item.job_id,
    item.output,
    item.sha256,
    item.processing_time_ms,
    item.submissions,
    item.error?.code ?? null,
    item.error?.message ?? null,
    item.preflight.join('; '),
    item.review?.score ?? null,
    item.review ? item.review.flags.join('; ') : null,
  ]
    .map(cell)
    .join(',')}\r\n`;
}
