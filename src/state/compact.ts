import { AtomicFile } from '../util/fs.js';
import type { ItemRecord, JournalRecord } from './records.js';
import type { ItemState, LastRun } from './state.js';

/**
 * The shortest journal that folds to the same item states: per item its `item` record and the
 * records that lead to its phase (one `submitting` per counted submission, so possible duplicates
 * stay counted), plus the last `run` and `plan` records. `foldJournal([...compact(s)])` equals `s`.
 */
export function* compactRecords(states: Iterable<ItemState>, last: LastRun): Generator<JournalRecord> {
  if (last.run) yield last.run;
  if (last.plan) yield last.plan;
  for (const s of states) yield* recordsFor(s);
}

/**
 * Replaces `file` with the compacted journal, streamed (never one string) and atomically. Returns
 * the number of records written.
 */
export async function writeCompactJournal(
  file: string,
  states: Iterable<ItemState>,
  last: LastRun,
): Promise<number> {
  let written = 0;
  const out = await AtomicFile.open(file);
  try {
    for (const record of compactRecords(states, last)) {
      written++;
      await out.write(`${JSON.stringify(record)}\n`);
    }
    await out.commit();
  } catch (error) {
    await out.abort();
    throw error;
  }
  return written;
}
function recordsFor(s: ItemState): ItemRecord[] {
  const { id, fp } = s;
  const records: ItemRecord[] = [
    {
      t: 'item',
      id,
      fp,
      image: s.image,
      module: s.module,
      style: s.style,
      src: s.src,
      ...(s.preflight ? { preflight: s.preflight } : {}),
    },
  ];
  const submitting = (n: number) => {
    for (let i = 0; i < n; i++) records.push({ t: 'submitting', id, fp, at: '' });
  };
  const accepted = () => records.push({ t: 'accepted', id, fp, job_id: s.jobId!, at: '' });
  const ended = (status: 'succeeded' | 'failed') =>
    records.push({
      t: 'ended',
      id,
      fp,
      job_id: s.jobId!,
      status,
      image_url: status === 'succeeded' ? s.imageUrl : null,
      processing_time_ms: s.processingTimeMs,
      error: status === 'failed' ? s.error : null,
    });
  switch (s.phase) {
    case 'rejected':
      submitting(s.submissions);
      records.push({ t: 'rejected', id, fp, error: s.error! });
      return records;
    case 'failed':
      if (s.jobId) {
        submitting(s.submissions);
        accepted();
        ended('failed');
      } else {
        // `refused` takes back the submission it answers.
        submitting(s.submissions + 1);
        records.push({ t: 'refused', id, fp, error: s.error! });
      }
      return records;
    case 'downloaded':
      submitting(s.submissions);
      accepted();
      ended('succeeded');
      records.push({
        t: 'downloaded',
        id,
        fp,
        job_id: s.jobId!,
        output: s.output!,
        sha256: s.sha256!,
        bytes: s.bytes!,
        mtime_ms: s.mtimeMs!,
      });
      if (s.review) records.push({ t: 'reviewed', id, fp, score: s.review.score, flags: s.review.flags });
      return records;
    case 'succeeded':
      submitting(s.submissions);
      accepted();
      ended('succeeded');
      break;
    case 'accepted':
      submitting(s.submissions);
      accepted();
      break;
    case 'unknown':
      submitting(s.submissions);
      break;
    case 'new':
      if (s.submissions > 0) {
        // Counted submissions that ended "not created" are already subtracted; keep the rest.
        submitting(s.submissions + 1);
        records.push({ t: 'not_created', id, fp, error: s.error ?? { code: 'not_created', message: '' } });
      }
      break;
  }
  if (s.error) records.push({ t: 'incomplete', id, fp, error: s.error });
  return records;
}

/** Compact when the journal holds many more records than a compacted one would (cheap to decide). */
export function shouldCompact(records: number, items: number): boolean {
  return records > 2000 && records > 4 * (items + 1);
}
