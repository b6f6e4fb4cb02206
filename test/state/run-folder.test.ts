import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { StateError } from '../../src/errors.js';
import type { JournalRecord } from '../../src/state/records.js';
import { openRunFolder } from '../../src/state/run-folder.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-folder-');
const opts = (warnings: string[] = []) => ({
  logLevel: 'info',
  secrets: ['sk_secret_value'],
  onWarning: (m: string) => warnings.push(m),
});
const lines = (records: JournalRecord[]) => records.map((r) => `${JSON.stringify(r)}\n`).join('');
const item = (id: string): JournalRecord => ({
  t: 'item',
  id,
  fp: 'fp',
  image: `${id}.jpg`,
  module: 'change-style',
  style: 'modern',
  src: null,
});

describe('openRunFolder', () => {
  it('creates the folder, locks it against a second run, and releases the lock on close', async () => {
    const dir = tmp.file('out/nightly');
    const folder = await openRunFolder(dir, opts());
    expect(folder).toMatchObject({ dir, resultsDir: path.join(dir, 'results'), resumed: false });
    expect((await readdir(dir)).sort()).toEqual(['.lock', 'journal.jsonl', 'results', 'run.log']);
    const second = await openRunFolder(dir, opts()).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(StateError);
    expect((second as StateError).message).toMatch(/in use by another kitchen-batch run \(pid \d+/);
    await folder.close();
    expect(await readdir(dir)).not.toContain('.lock');
    const again = await openRunFolder(dir, opts());
    await again.close();
  });

  it('resumes: folds the journal, cuts a torn last line with a warning, removes leftover .part files', async () => {
    const dir = tmp.file('out');
    const warnings: string[] = [];
    await tmp.write('out/results/.k1.4242.part', 'half an image');
    await tmp.write('out/results/k0.jpg', 'a finished result');
    await tmp.write('out/journal.jsonl', `${lines([item('k0'), item('k1')])}{"t":"submitting","id":"k1`);
    const folder = await openRunFolder(dir, opts(warnings));
    expect(folder.resumed).toBe(true);
    expect([...folder.states.keys()]).toEqual(['k0', 'k1']);
    expect(warnings).toEqual(['journal.jsonl line 3 was torn by a crash mid-write and is ignored']);
    expect(await readdir(folder.resultsDir)).toEqual(['k0.jpg']);
    await folder.journal.append({ t: 'rejected', id: 'k1', fp: 'fp', error: { code: 'x', message: 'y' } });
    await folder.close();
    const text = await readFile(path.join(dir, 'journal.jsonl'), 'utf8');
    expect(
      text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).t),
    ).toEqual(['item', 'item', 'rejected']);
    const log = await readFile(path.join(dir, 'run.log'), 'utf8');
    expect(log).toContain('"event":"part_removed"');
    expect(log).toContain('"event":"journal_torn_line"');
  });

  it('compacts a journal that has grown far past its items, keeping what they fold to', async () => {
    const dir = tmp.file('out');
    const records: JournalRecord[] = [
      { t: 'run', at: 'a', v: 1, manifest: 'm', base_url: 'u', pid: 1 },
      item('k'),
    ];
    for (let i = 0; i < 2500; i++) {
      records.push({
        t: 'incomplete',
        id: 'k',
        fp: 'fp',
        error: { code: 'job_timeout', message: `round ${i}` },
      });
    }
    await tmp.write('out/journal.jsonl', lines(records));
    const folder = await openRunFolder(dir, opts());
    expect(folder.states.get('k')?.error).toEqual({ code: 'job_timeout', message: 'round 2499' });
    await folder.close();
    const after = (await readFile(path.join(dir, 'journal.jsonl'), 'utf8')).trim().split('\n');
    expect(after.length).toBeLessThan(10);
  });

  it('refuses a journal damaged in the middle (exit 2, line named) and leaves no lock behind', async () => {
    const dir = tmp.file('out');
    await tmp.write('out/journal.jsonl', `${lines([item('a')])}not json\n${lines([item('b')])}`);
    const error = await openRunFolder(dir, opts()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateError);
    expect((error as StateError).message).toMatch(/journal\.jsonl:2: journal line is not a valid record/);
    expect(await readdir(dir)).not.toContain('.lock');
  });

  it('names the folder when it cannot be created', async () => {
    await writeFile(tmp.file('file'), 'x');
    const error = await openRunFolder(tmp.file('file/out'), opts()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateError);
    expect((error as StateError).message).toMatch(/cannot create the output folder .*file\/out \(ENOTDIR\)/);
  });
});
