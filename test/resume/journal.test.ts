/**
 * A damaged journal (FAULTS A.2): a torn last line is cut with a warning and the rerun goes on; a
 * bad line in the middle stops the run with exit 2 naming the line, touching nothing.
 */
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/index.js';
import { killAllClis } from '../helpers/cli.js';
import { type Fixture, jobRequests, makeFixture, readReport, removeDir, run, sandboxFor } from './world.js';

const cleanup: Array<() => Promise<void>> = [];

afterEach(async () => {
  await killAllClis();
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A fixture whose run already finished. */
async function finished(count: number): Promise<{ fixture: Fixture; sandbox: Sandbox; out: string }> {
  const fixture = await makeFixture(count);
  cleanup.push(() => removeDir(fixture.dir));
  const sandbox = await sandboxFor(fixture, { processingMs: 200, jitterMs: 50 });
  cleanup.push(() => sandbox.close());
  const out = path.join(fixture.dir, 'out');
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
