/**
 * Secrets in URLs, end to end through the CLI (issue 32): `plan` and `run --sandbox` over a manifest
 * whose images are pre-signed URLs on a documentation-only address (203.0.113.0/24: no packet
 * leaves, whatever reads it). Whatever the items come to, stdout, stderr, run.log and the three
 * reports show the signatures as `***`, and the journal keeps the URLs whole for the rerun.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import { textSink } from '../helpers/cli.js';
import { tempDirForTest } from '../helpers/tmp.js';

const SIGNATURE = 'deadbeefcafe0123456789signature';
const TOKEN = 'IQoJb3JpZ2luSESSIONTOKEN';
const URL_1 =
  `https://203.0.113.7/kitchens/k1.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=900` +
  `&X-Amz-Security-Token=${TOKEN}&X-Amz-Signature=${SIGNATURE}`;

async function cli(args: string[], cwd: string) {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(args, { stdout, stderr, env: {}, cwd });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

function expectRedacted(where: string, text: string): void {
  expect([where, text.includes(SIGNATURE) || text.includes(TOKEN)]).toEqual([where, false]);
}

describe('a manifest of pre-signed URLs', () => {
  it('plan and run show no signature anywhere a person reads; the journal keeps the URL', async () => {
    const tmp = await tempDirForTest('kb-presigned-');
    await tmp.write('feed.csv', `id,image,style\nk1,"${URL_1}",modern\n`);

    const plan = await cli(['plan', 'feed.csv', '--json', '--out', 'out'], tmp.dir);
    expect(plan.code).toBe(1);
    expectRedacted('plan stdout', plan.stdout);
    expectRedacted('plan stderr', plan.stderr);
    const planned = JSON.parse(plan.stdout) as { items: Array<{ image: string; action: string }> };
    expect(planned.items).toMatchObject([{ action: 'reject' }]);
    expect(planned.items[0]!.image).toContain('X-Amz-Signature=***');
    expect(planned.items[0]!.image).toContain('X-Amz-Expires=900');
    const table = await cli(['plan', 'feed.csv', '--out', 'out'], tmp.dir);
    expectRedacted('plan table', table.stdout);

    const run = await cli(['run', 'feed.csv', '--sandbox', '--no-progress', '--out', 'out'], tmp.dir);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/1 items: 0 succeeded, 0 failed, 1 rejected/);
    expectRedacted('run stdout', run.stdout);
    expectRedacted('run stderr', run.stderr);
    for (const file of ['run.log', 'report.json', 'report.csv', 'report.html']) {
      expectRedacted(file, await readFile(tmp.file(`out/${file}`), 'utf8'));
    }
    const report = JSON.parse(await readFile(tmp.file('out/report.json'), 'utf8')) as {
      items: Array<{ image: string }>;
    };
    expect(report.items[0]!.image).toContain('X-Amz-Security-Token=***&X-Amz-Signature=***');
    // The rerun needs the signature: the journal has it.
    expect(await readFile(tmp.file('out/journal.jsonl'), 'utf8')).toContain(SIGNATURE);
  });
});
