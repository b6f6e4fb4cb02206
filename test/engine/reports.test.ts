import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Report } from '../../src/types.js';
import { closeWorkspaces, workspace } from '../helpers/batch.js';

afterEach(closeWorkspaces);

/** The page's items, from report.html's data block. */
async function pageItems(
  out: string,
): Promise<Array<{ id: string; status: string; src: string | null; out: string | null }>> {
  const html = await readFile(path.join(out, 'report.html'), 'utf8');
  const json = /<script type="application\/json" id="report-data">([\s\S]*?)<\/script>/.exec(html)![1]!;
  return (
    JSON.parse(json) as {
      items: Array<{ id: string; status: string; src: string | null; out: string | null }>;
    }
  ).items;
}

describe('run: reports', () => {
  it('has a thumbnail of every succeeded item’s source and result on disk when the run ends', async () => {
    const ws = await workspace({ items: 6 });
    const result = await ws.run({ output: { html: true } });
    expect(result.exitCode).toBe(0);
    const items = await pageItems(ws.out);
    expect(items.map((i) => i.status)).toEqual(Array(6).fill('succeeded'));
    for (const item of items) {
      expect(item.src, item.id).toMatch(/^thumbs\//);
      expect(item.out, item.id).toMatch(/^thumbs\//);
      await access(path.join(ws.out, decodeURIComponent(item.src!)));
      await access(path.join(ws.out, decodeURIComponent(item.out!)));
    }
  });

  it('returns the run’s totals and its first problems; report.json holds every item, plan.jsonl the plan', async () => {
    const ws = await workspace({
      items: 3,
      extraRows: [
        'gone,images/nothing-here.jpg,change-style,modern,,',
        'typo,images/k1.jpg,change-style,japandy,,',
      ],
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(1);
    expect(result.run.totals).toMatchObject({ items: 5, succeeded: 3, rejected: 2 });
    expect(result.problems.map((p) => [p.id, p.error?.code])).toEqual([
      ['gone__modern', 'file_not_found'],
      ['typo__japandy', 'unknown_style'],
    ]);
    const report = (await ws.report()) as Report;
    expect(report.items.map((i) => i.id)).toEqual([
      'k0__scandinavian',
      'k1__industrial',
      'k2__japandi',
      'gone__modern',
      'typo__japandy',
    ]);
    const plan = (await readFile(path.join(ws.out, 'plan.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(plan.map((entry: unknown[]) => entry[0])).toEqual(report.items.map((i) => i.id));
    expect(plan[0]).toEqual(['k0__scandinavian', 'images/k0.jpg', 'change-style', 'scandinavian']);
  });
});
