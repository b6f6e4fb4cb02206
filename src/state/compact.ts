import { AtomicFile } from '../util/fs.js';
import type { LastRun } from './fold.js';
import type { ItemRecord, JournalRecord } from './records.js';
import type { ItemState, Phase } from './state.js';

/**
 * The shortest journal that folds to the same item states: per item its `item` record and the
 * records that lead to its phase (one `submitting` per counted submission, in an order that folds to
 * the same ambiguous resends, so possible duplicates stay counted), plus the last `run` and `plan`
 * records. `foldJournal([...compact(s)])` equals `s`.
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
  const notCreated = () =>
    records.push({ t: 'not_created', id, fp, error: s.error ?? { code: 'not_created', message: '' } });
  switch (s.phase) {
    case 'rejected':
      submissions(s, records, false);
      if (s.jobId) accepted();
      records.push({ t: 'rejected', id, fp, error: s.error! });
      return records;
    case 'failed':
      if (s.jobId) {
        submissions(s, records, false);
        accepted();
        ended('failed');
      } else {
        // `refused` takes back the submission it answers.
        submissions(s, records, true);
        records.push({ t: 'submitting', id, fp, at: '' }, { t: 'refused', id, fp, error: s.error! });
      }
      return records;
    case 'downloaded':
      submissions(s, records, false);
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
      submissions(s, records, false);
      accepted();
      ended('succeeded');
      break;
    case 'accepted':
      submissions(s, records, false);
      accepted();
      break;
    case 'unknown':
      submissions(s, records, false);
      break;
    case 'new':
      // Counted submissions that ended "not created" are already subtracted: one more, taken back.
      if (submissions(s, records, true) !== 'new') {
        records.push({ t: 'submitting', id, fp, at: '' });
        notCreated();
      }
      break;
  }
  if (s.error) records.push({ t: 'incomplete', id, fp, error: s.error });
  return records;
}

/**
 * The `submitting` records of `s`'s counted POSTs (`submissions`), in an order that folds to the same
 * `ambiguousResends` and `outcomeLost` (docs/contract.md#submissions-and-duplicates). Without a lost
 * outcome: the POSTs one after another, each answered (`accepted`, a placeholder job id the item's own
 * records replace). With one: the lost POST left unanswered, then the resends sent over it; while the
 * outcome is still lost they stay unanswered (a resend that created nothing marks it lost without
 * counting), else the last of them is answered and the POSTs sent after it follow, answered. The last
 * POST is answered when `answerLast` (the item's records go on with a POST of their own), else left
 * open for them. Returns the phase the records leave the item in.
 */
function submissions(s: ItemState, records: ItemRecord[], answerLast: boolean): Phase {
  const { id, fp } = s;
  const total = s.submissions;
  const send = (answer: boolean) => {
    records.push({ t: 'submitting', id, fp, at: '' });
    if (answer) records.push({ t: 'accepted', id, fp, job_id: '', at: '' });
  };
  const answered = (n: number) => {
    for (let i = 0; i < n; i++) send(i < n - 1 || answerLast);
    return n === 0 ? null : answerLast ? 'accepted' : 'unknown';
  };
  const resends = Math.min(s.ambiguousResends, Math.max(0, total - 1));
  if (total === 0 || (!s.outcomeLost && resends === 0)) return answered(total) ?? 'new';
  if (s.outcomeLost) {
    for (let i = 0; i < total - 1 - resends; i++) send(true);
    // The lost POST, and the resends sent while its outcome is still unknown.
    send(false);
    for (let i = 0; i < resends; i++) send(false);
    if (resends > 0) return 'unknown';
    // A resend that created nothing marks the outcome lost without counting.
    records.push({ t: 'submitting', id, fp, at: '' });
    records.push({ t: 'not_created', id, fp, error: s.error ?? { code: 'not_created', message: '' } });
    return 'new';
  }
  // The outcome was lost, and a resend over it was answered: the POSTs after it were not resends.
  send(false);
  for (let i = 0; i < resends; i++) send(i === resends - 1);
  return answered(total - 1 - resends) ?? 'accepted';
}

/** Compact when the journal holds many more records than a compacted one would (cheap to decide). */
export function shouldCompact(records: number, items: number): boolean {
  return records > 2000 && records > 4 * (items + 1);
}
