/**
 * One stage sequence, two drivers (issue 31): the same items run through the local flow (`run`:
 * journal, p-queue) and through the worker mode (`enqueue` + `runWorker`: BullMQ, Redis state)
 * against one sandbox must leave the same item states, field by field, and the same report rows.
 * Only what legitimately differs is normalised: job ids, result URLs, times, the result's bytes (the
 * sandbox makes each job's image anew, so its review too). Two passes: the second replaces a rejected image by another
 * one rejected with the same code and another message (the drivers once disagreed on recording
 * that), and adds an item whose job fails at the service.
 */
import { appendFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { runBatch } from '../../src/pipeline/run.js';
import type { Sandbox } from '../../src/sandbox/index.js';
import { foldJournal } from '../../src/state/fold.js';
import { readJournal } from '../../src/state/journal.js';
import type { ItemState } from '../../src/state/state.js';
import type { Report, ReportItem } from '../../src/types.js';
import { DEFAULT_KEYS } from '../../src/worker/queue.js';
import { runWorker } from '../../src/worker/run.js';
import { canaryKey, QUICK_JOBS, sandboxForTest } from '../helpers/sandbox.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';
import { HAS_REDIS } from '../support/redis.js';
import { cli, itemStates, useRedis } from '../worker/world.js';

/** The fields of a state that differ between two runs of the same items for good reasons. */
function comparable(state: ItemState & { queued?: string }): Record<string, unknown> {
  const {
    queued: _queued,
    jobId,
    imageUrl,
    processingTimeMs,
    sha256,
    bytes,
    mtimeMs,
    review,
    ...rest
  } = state;
  return {
    ...rest,
    // Present or not is the same; the values are each job's own.
    jobId: jobId !== null,
    imageUrl: imageUrl !== null,
    processingTimeMs: processingTimeMs !== null,
    sha256: sha256 !== null,
    bytes: bytes !== null,
    mtimeMs: mtimeMs !== null,
    // Reviewed or not; the verdict is on each job's own image.
    review: review !== null,
  };
}

/** A report row without what is each job's own. */
function comparableRow(row: ReportItem): Record<string, unknown> {
  const { job_id, processing_time_ms, sha256, review, ...rest } = row;
  return {
    ...rest,
    job_id: job_id !== null,
    processing_time_ms: processing_time_ms !== null,
    sha256: sha256 !== null,
    review: review !== null,
  };
}

/** The same manifest in two folders (one per driver): its images, and how to change them. */
async function catalogue(sandbox: Sandbox) {
  const tmp = await tempDirForTest('kb-drivers-');
  await mkdir(tmp.file('images'));
  for (const i of [0, 1, 2])
    await writeFile(tmp.file(`images/k${i}.jpg`), await kitchenJpeg(i + 1, 160, 120));
  // Rejected before submission: not an image (then, in the second pass, another non-image).
  await writeFile(tmp.file('images/odd.jpg'), 'a shopping list, not a kitchen\n');
  const manifest = tmp.file('catalogue.csv');
  await writeFile(
    manifest,
    [
      'id,image,module,style',
      'k0,images/k0.jpg,change-style,modern',
      'k1,images/k1.jpg,change-style,modern',
      'odd,images/odd.jpg,change-style,modern',
      'k0b,images/k0.jpg,change-style,baroque-nonexistent',
      '',
    ].join('\n'),
  );
  return {
    dir: tmp.dir,
    manifest,
    out: (driver: string) => tmp.file(`out-${driver}`),
    /** The second pass: `odd` is rejected for another reason, and a new item's job fails. */
    change: async () => {
      await writeFile(tmp.file('images/odd.jpg'), '');
      await appendFile(manifest, 'k2,images/k2.jpg,change-style,modern\n');
      sandbox.setFaults({ failRate: 1 });
    },
  };
}

describe.skipIf(!HAS_REDIS)('the local flow and the worker drive the same steps', () => {
  const redis = useRedis();

  it('leave the same item states and report rows, pass after pass', { timeout: 180_000 }, async () => {
    const apiKey = canaryKey();
    const service = { baseUrl: '', apiKey };
    // One sandbox per driver, with the same faults: each sees only its own driver's requests.
    const sandboxes = {
      run: await sandboxForTest({ apiKey, ...QUICK_JOBS }),
      worker: await sandboxForTest({ apiKey, ...QUICK_JOBS }),
    };
    const c = await catalogue(sandboxes.run);
    const local = async () => {
      const result = await runBatch({
        manifest: c.manifest,
        out: c.out('run'),
        cwd: c.dir,
        service: { ...service, baseUrl: sandboxes.run.url, retry: { retries: 3, baseMs: 20, capMs: 100 } },
        output: { html: false },
      });
      const { records } = await readJournal(path.join(result.outDir, 'journal.jsonl'));
      const report = JSON.parse(await readFile(path.join(result.outDir, 'report.json'), 'utf8')) as Report;
      return { states: foldJournal(records), report };
    };
    const worker = async () => {
      const enqueued = await cli([
        'enqueue',
        c.manifest,
        '--redis',
        redis.url,
        '--out',
        c.out('worker'),
        '--json',
      ]);
      expect(enqueued.code, enqueued.stderr).toBe(0);
      const summary = await runWorker({
        redisUrl: redis.url,
        service: { ...service, baseUrl: sandboxes.worker.url },
        untilDrained: true,
        name: 'diff',
      });
      expect(summary.drained).toBe(true);
      const built = await cli(['report', '--redis', redis.url, '--json']);
      // 1: not every item succeeded (docs/contract.md#exit-codes).
      expect(built.code, built.stderr).toBe(1);
      const report = JSON.parse(await readFile(path.join(c.out('worker'), 'report.json'), 'utf8')) as Report;
      return { states: await itemStates(redis.url), report };
    };
    const compare = async (expected: Record<string, string>) => {
      const a = await local();
      const b = await worker();
      const ids = Object.keys(expected).sort();
      expect([...b.states.keys()].sort()).toEqual(ids);
      for (const id of ids) {
        const [fromRun, fromWorker] = [a.states.get(id), b.states.get(id)];
        expect(fromRun?.phase, id).toBe(expected[id]);
        expect(comparable(fromWorker!), id).toEqual(comparable(fromRun!));
      }
      const rows = (report: Report) =>
        Object.fromEntries(report.items.map((row) => [row.id, comparableRow(row)]));
      expect(rows(b.report)).toEqual(rows(a.report));
      expect(b.report.run.totals).toEqual(a.report.run.totals);
    };

    await compare({
      k0__modern: 'downloaded',
      k1__modern: 'downloaded',
      odd__modern: 'rejected',
      'k0b__baroque-nonexistent': 'rejected',
    });
    await c.change();
    sandboxes.worker.setFaults({ failRate: 1 });
    await compare({
      k0__modern: 'downloaded',
      k1__modern: 'downloaded',
      odd__modern: 'rejected',
      'k0b__baroque-nonexistent': 'rejected',
      k2__modern: 'failed',
    });
    // The second rejection of `odd` is on record in both, with its own words.
    const client = new Redis(redis.url);
    try {
      const odd = JSON.parse((await client.hget(DEFAULT_KEYS.states, 'odd__modern')) ?? '{}') as ItemState;
      expect(odd.error?.message).toMatch(/empty file/);
    } finally {
      client.disconnect();
    }
  });
});
