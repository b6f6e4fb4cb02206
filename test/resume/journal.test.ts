/**
 * A damaged journal (docs/faults.md A.2): a torn last line is cut with a warning and the rerun goes on; a
 * bad line in the middle stops the run with exit 2 naming the line, touching nothing.
 */
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/index.js';
import { jobRequests } from '../helpers/sandbox.js';
import { type Fixture, perTest, readReport, run } from './world.js';

const { setup } = perTest({ processingMs: 200, jitterMs: 50 });

/** A fixture whose run already finished. */
async function finished(count: number): Promise<{ fixture: Fixture; sandbox: Sandbox; out: string }> {
  const { fixture, sandbox, out } = await setup(count);
  const first = await run(fixture, sandbox, out);
  expect(first.code, first.stderr).toBe(0);
  return { fixture, sandbox, out };
}

describe('journal damage', () => {
  it('a torn last line is cut with a warning; the rerun exits 0 and sends no job request', async () => {
    const { fixture, sandbox, out } = await finished(2);
    const file = path.join(out, 'journal.jsonl');
    const text = await readFile(file, 'utf8');
    const lines = text.trimEnd().split('\n');
    await appendFile(file, '{"t":"accepted","id":"k0__modern","fp":"0123', 'utf8');
    const since = sandbox.stats.requests.length;
    const rerun = await run(fixture, sandbox, out);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stderr).toMatch(new RegExp(`line ${lines.length + 1}.*torn|torn.*line ${lines.length + 1}`));
    expect(jobRequests(sandbox, since)).toBe(0);
    // The torn bytes are gone and every line parses again.
    const after = await readFile(file, 'utf8');
    expect(after.endsWith('\n')).toBe(true);
    for (const line of after.trimEnd().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
    expect((await readReport(out)).run.totals.succeeded).toBe(2);
  });

  it('garbage in the middle stops the run: exit 2 naming the line, nothing sent, journal untouched', async () => {
    const { fixture, sandbox, out } = await finished(2);
    const file = path.join(out, 'journal.jsonl');
    const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
    expect(lines.length).toBeGreaterThan(4);
    lines.splice(3, 0, '{"t":"accepted","id":"k1__japandi",GARBAGE');
    const damaged = `${lines.join('\n')}\n`;
    await writeFile(file, damaged);
    const since = sandbox.stats.requests.length;
    const rerun = await run(fixture, sandbox, out);
    expect(rerun.code, rerun.stderr).toBe(2);
    expect(rerun.stderr).toContain('journal.jsonl:4');
    expect(sandbox.stats.requests.length).toBe(since);
    expect(await readFile(file, 'utf8')).toBe(damaged);
    const { existsSync } = await import('node:fs');
    expect(existsSync(path.join(out, '.lock'))).toBe(false);
  });
});
