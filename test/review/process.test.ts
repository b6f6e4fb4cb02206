/**
 * The review's own process (src/review/child.ts, docs/contract.md#review): it runs at the lowest
 * priority, every thread of it; it never gets the API key; a child that dies mid-review costs the
 * reviews in flight (skipped, said in run.log), not the run, and the next review starts a new one;
 * an idle reviewer does not keep its process alive, and `close` stops the child.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Reviewer } from '../../src/review/index.js';
import type { ItemState } from '../../src/state/state.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';

const KEY = 'kb-review-child-secret-7f3a';

/** The review child of this process: the child whose command line names review/child. */
function reviewChild(): number | undefined {
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    let children = '';
    try {
      children = readFileSync(`/proc/${process.pid}/task/${tid}/children`, 'utf8');
    } catch {}
    for (const pid of children.split(' ').filter(Boolean).map(Number)) {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmdline.includes(`review${path.sep}child.`)) return pid;
    }
  }
  return undefined;
}

/** The nice value of each thread of a process (field 19 of /proc/<pid>/task/<tid>/stat). */
function threadNices(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
}

async function setup() {
  const tmp = await tempDirForTest('kb-review-child-');
  const source = await tmp.write('src.jpg', await kitchenJpeg(1));
  const states = new Map<string, ItemState>();
  for (const id of ['a', 'b', 'c']) {
    await tmp.write(`out/${id}.jpg`, await kitchenJpeg(1));
    states.set(id, {
      id,
      fp: `fp-${id}`,
      image: 'src.jpg',
      module: 'configurator',
      style: null,
      src: { path: source, sha256: 'same', size: 0, mtimeMs: 0 },
      phase: 'downloaded',
      output: `${id}.jpg`,
      review: null,
    } as unknown as ItemState);
  }
  const lines: Array<Record<string, unknown>> = [];
  const recorded: string[] = [];
  const reviewer = new Reviewer({
    outDir: tmp.file('out'),
    states,
    record: async (record) => {
      recorded.push(record.id);
    },
    logger: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) }),
  });
  return { reviewer, lines, recorded };
}

describe.skipIf(process.platform !== 'linux')('the review process', () => {
  it('runs every thread at nice 19, without the API key in its environment, and stops on close', async () => {
    const saved = process.env.KITCHEN_API_KEY;
    process.env.KITCHEN_API_KEY = KEY;
    const { reviewer, recorded } = await setup();
    try {
      await reviewer.reviewNow('a');
      expect(recorded).toEqual(['a']);
      const pid = reviewChild();
      expect(pid).toBeTypeOf('number');
      // sharp has started its threads by now: each of them, and the ones before, run at nice 19.
      const nices = threadNices(pid!);
      expect(nices.length).toBeGreaterThan(1);
      expect(new Set(nices)).toEqual(new Set([19]));
      expect(readFileSync(`/proc/${pid}/environ`, 'latin1')).not.toContain(KEY);
      await reviewer.close();
      expect(reviewChild()).toBeUndefined();
    } finally {
      if (saved === undefined) delete process.env.KITCHEN_API_KEY;
      else process.env.KITCHEN_API_KEY = saved;
      await reviewer.close();
    }
  });

  it('a child killed mid-review skips that review with a warning; the next review starts a new child', async () => {
    const { reviewer, lines, recorded } = await setup();
    try {
      await reviewer.reviewNow('a');
      const first = reviewChild()!;
      // The child has the review in hand when it dies (SIGSTOP first, so it cannot answer in between).
      process.kill(first, 'SIGSTOP');
      const lost = reviewer.reviewNow('b');
      process.kill(first, 'SIGKILL');
      await lost;
      expect(recorded).toEqual(['a']);
      expect(reviewer.stats.skipped).toBe(1);
      expect(lines.find((l) => l.event === 'review_process_failed')?.err).toMatch(/signal SIGKILL/);
      expect(lines.find((l) => l.event === 'review_skipped')?.item).toBe('b');
      await reviewer.reviewNow('c');
      expect(recorded).toEqual(['a', 'c']);
      expect(reviewChild()).not.toBe(first);
    } finally {
      await reviewer.close();
    }
  });
});
