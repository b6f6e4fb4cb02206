import type { Report } from '../types.js';

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
] as const;

/** RFC 4180 quoting; also neutralises cells a spreadsheet would run as a formula. */
function cell(value: string | number | null): string {
  if (value === null) return '';
  let s = String(value);
  if (typeof value === 'string' && /^[=+@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** report.csv text: one row per item, CRLF line ends. */
export function reportCsv(report: Report): string {
  const lines = [REPORT_CSV_COLUMNS.join(',')];
  for (const item of report.items) {
    lines.push(
      [
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
      ]
        .map(cell)
        .join(','),
    );
  }
  return `${lines.join('\r\n')}\r\n`;
}
