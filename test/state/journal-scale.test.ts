import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { runWithHeap, srcUrl } from '../helpers/heap.js';
import { tempDirForTest } from '../helpers/tmp.js';

const HEAP_MB = 48;
const ITEMS = 1000;
const RECORDS = 1_300_000;

/** A journal of ~150 MB: 1,000 items and many records about them (a catalogue resumed many times), torn at the end. */
async function bigJournal(file: string): Promise<void> {
  const out = createWriteStream(file);
  const write = async (text: string) => {
    if (!out.write(text)) await once(out, 'drain');
  };
  await write(
    `${JSON.stringify({ t: 'run', at: 'a', v: 1, manifest: 'm.csv', base_url: 'http://s', pid: 1 })}\n`,
  );
  for (let i = 0; i < ITEMS; i++) {
    await write(
      `${JSON.stringify({ t: 'item', id: `k${i}`, fp: 'f'.repeat(32), image: `img/k${i}.jpg`, module: 'change-style', style: 'modern', src: null })}\n`,
    );
  }
  let chunk = '';
  for (let r = 0; r < RECORDS; r++) {
    const error = {
      code: 'job_timeout',
      message: `round ${Math.floor(r / ITEMS)} of a job that did not end`,
    };
    chunk += `${JSON.stringify({ t: 'incomplete', id: `k${r % ITEMS}`, fp: 'f'.repeat(32), error })}\n`;
    if (chunk.length > 1 << 16) {
      await write(chunk);
      chunk = '';
    }
  }
  await write(`${chunk}{"t":"submitting","id":"k1","fp":"ff`); // torn by a crash mid-append
  out.end();
  await once(out, 'finish');
}

describe('a journal larger than the memory the process has', () => {
  it(`is read and folded as a stream under a ${HEAP_MB} MB heap, where holding it as one string dies`, async () => {
    const tmp = await tempDirForTest('kb-journal-big-');
    const file = tmp.file('journal.jsonl');
    await bigJournal(file);
    const bytes = (await stat(file)).size;
    expect(bytes).toBeGreaterThan(3 * HEAP_MB * 1024 * 1024);

    const folded = await runWithHeap(
      tmp.dir,
      `import { loadJournal } from '${srcUrl('state/journal.ts')}';
       const { fold, tornLine } = await loadJournal(${JSON.stringify(file)}, { repair: false });
       console.log(JSON.stringify({ records: fold.records, items: fold.states.size, tornLine, last: fold.states.get('k999')?.error }));`,
      HEAP_MB,
    );
    expect(folded.stderr).toBe('');
    expect(folded.code).toBe(0);
    expect(JSON.parse(folded.stdout)).toEqual({
      records: 1 + ITEMS + RECORDS,
      items: ITEMS,
      tornLine: 2 + ITEMS + RECORDS,
      last: { code: 'job_timeout', message: `round ${RECORDS / ITEMS - 1} of a job that did not end` },
    });

    // The control: the same file read whole into a string does not fit in that heap.
    const whole = await runWithHeap(
      tmp.dir,
      `import { readFile } from 'node:fs/promises';
       const text = await readFile(${JSON.stringify(file)}, 'utf8');
       console.log(text.split('\\n').length);`,
      HEAP_MB,
    );
    expect(whole.code).not.toBe(0);
  });
});
