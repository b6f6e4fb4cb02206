import path from 'node:path';
import type { Report } from '../types.js';
import { writeFileAtomic } from '../util/fs.js';
import { reportCsv } from './csv.js';
import { writeHtmlReport } from './html/index.js';

/** Options of {@link writeReports}. */
export interface WriteReportsOptions {
  /** Also write report.html (with thumbnails). @default true */
  html?: boolean;
  /** Folder the items' `image` paths are relative to (the manifest's folder), for thumbnails. */
  manifestDir?: string;
}

/** Writes report.json and report.csv atomically (and report.html when asked) into `outDir`. */
export async function writeReports(
  outDir: string,
  report: Report,
  options: WriteReportsOptions = {},
): Promise<void> {
  await writeFileAtomic(path.join(outDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  await writeFileAtomic(path.join(outDir, 'report.csv'), reportCsv(report));
  if (options.html ?? true) {
    const base = options.manifestDir;
    await writeHtmlReport({
      outDir,
      report,
      sourcePath: (item) =>
        path.isAbsolute(item.image) ? item.image : base ? path.resolve(base, item.image) : null,
    });
  }
}
