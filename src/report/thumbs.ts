import { randomBytes } from 'node:crypto';
import { rename, rm, stat } from 'node:fs/promises';
import sharp from 'sharp';

/** One thumbnail to make: a source image and where its thumbnail goes. */
export interface ThumbJob {
  /** Absolute path of the image to shrink. */
  source: string;
  /** Absolute path of the thumbnail (WebP). */
  dest: string;
}

/** What became of one thumbnail. */
export type ThumbOutcome = 'reused' | 'created' | 'failed';

/** Options of {@link ensureThumbnails}. */
export interface ThumbOptions {
  /** Long side of the thumbnail in pixels; smaller images are not enlarged. */
  size: number;
  /** Thumbnails made at once. */
  concurrency: number;
}

/**
 * Makes one WebP thumbnail unless a thumbnail newer than its source already exists, so that
 * `kitchen-batch report` reruns only touch what changed. Never throws for a bad image: a missing,
 * unreadable or corrupt source yields `'failed'` and the page shows a placeholder instead.
 */
export async function ensureThumbnail(job: ThumbJob, size: number): Promise<ThumbOutcome> {
  let sourceMtime: number;
  try {
    sourceMtime = (await stat(job.source)).mtimeMs;
  } catch {
    return 'failed';
  }
  try {
    // `>=`: a thumb written in the same millisecond as its source was still made from that source.
    if ((await stat(job.dest)).mtimeMs >= sourceMtime) return 'reused';
  } catch {
    // No thumbnail yet.
  }
  // Temp file + rename: a crash mid-write must not leave a torn thumb that the mtime check would keep.
  // No fsync: a thumbnail is a cache, and 10,000 fsyncs would make reports slow.
  const tmp = `${job.dest}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await sharp(job.source, { failOn: 'error' })
      .rotate() // honour EXIF orientation so phone photos are not shown sideways
      .resize(size, size, { fit: 'inside', withoutEnlargement: true })
      .webp({ quality: 74, effort: 2 })
      .toFile(tmp);
    await rename(tmp, job.dest);
    return 'created';
  } catch {
    await rm(tmp, { force: true }).catch(() => {});
    return 'failed';
  }
}

/**
 * Runs {@link ensureThumbnail} for every job with at most `concurrency` at once.
 * Returns the outcome per `dest`; jobs with the same `dest` are made once.
 */
export async function ensureThumbnails(
  jobs: readonly ThumbJob[],
  options: ThumbOptions,
): Promise<Map<string, ThumbOutcome>> {
  const unique = new Map<string, ThumbJob>();
  for (const job of jobs) if (!unique.has(job.dest)) unique.set(job.dest, job);
  const queue = [...unique.values()];
  const outcomes = new Map<string, ThumbOutcome>();
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let job = queue[next++]; job !== undefined; job = queue[next++]) {
      outcomes.set(job.dest, await ensureThumbnail(job, options.size));
    }
  };
  const workers = Math.max(1, Math.min(options.concurrency, queue.length));
  await Promise.all(Array.from({ length: workers }, worker));
  return outcomes;
}
