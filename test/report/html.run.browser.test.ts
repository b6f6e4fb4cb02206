import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import type { Report } from '../../src/types.js';
import { type Workspace, workspace } from '../helpers/batch.js';
import { hasChromium, launchBrowser } from '../helpers/browser.js';

/** The page's inline data, without the rebuild time (the only thing a rebuild may change). */
function pageData(html: string): unknown {
  const match = /<script type="application\/json" id="[^"]*">([\s\S]*?)<\/script>/.exec(html);
  const data = JSON.parse(match![1]!) as { items: unknown[] };
  return data.items;
}

interface ImageGlobals {
  document: { querySelectorAll(s: string): ArrayLike<{ complete: boolean }> };
}

describe.skipIf(!hasChromium())('report.html of a real sandbox run, in headless Chromium', () => {
  let ws: Workspace;
  let browser: Browser;
  let report: Report;

  beforeAll(async () => {
    // Succeeded and failed jobs (seeded fail rolls: seed 1 fails 2 of the 6 creates, whatever the
    // order), a missing file and an unknown style (rejected).
    ws = await workspace({
      items: 6,
      sandbox: { seed: 1, faults: { failRate: 0.34, failCode: 'not_a_kitchen' } },
      extraRows: [
        'gone,images/nothing-here.jpg,change-style,modern,,',
        'typo,images/k1.jpg,change-style,japandy,,',
      ],
    });
    await ws.run({ output: { html: true } });
    report = await ws.report();
    browser = (await launchBrowser())!;
  });
  afterAll(async () => {
    await browser?.close();
    await ws?.close();
  });

  it('shows the run: totals, every thumbnail loaded, a working status filter; a screenshot for people', async () => {
    const t = report.run.totals;
    expect(t.succeeded).toBeGreaterThan(0);
    expect(t.failed).toBeGreaterThan(0);
    expect(t.rejected).toBe(2);
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(pathToFileURL(path.join(ws.out, 'report.html')).href);
    await page.locator('#grid .card').first().waitFor();
    for (const key of ['items', 'succeeded', 'failed', 'rejected', 'incomplete'] as const) {
      await expect(page.locator(`[data-stat="${key}"] .value`).textContent()).resolves.toBe(String(t[key]));
    }
    const images = page.locator('#grid img');
    const n = await images.count();
    // Every item has a before; succeeded items an after.
    expect(n).toBe(t.items - 1 + t.succeeded);
    for (let i = 0; i < n; i++) await images.nth(i).scrollIntoViewIfNeeded();
    await page.waitForFunction(() =>
      Array.from((globalThis as unknown as ImageGlobals).document.querySelectorAll('#grid img')).every(
        (img) => img.complete,
      ),
    );
    const widths = await images.evaluateAll((imgs) =>
      imgs.map((img) => (img as unknown as { naturalWidth: number }).naturalWidth),
    );
    expect(widths.every((w) => w > 0)).toBe(true);

    const statuses = () =>
      page.locator('#grid .card').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-status')));
    await page.locator('#status-filter [data-status="failed"]').click();
    expect(await statuses()).toEqual(Array(t.failed).fill('failed'));
    await page.locator('#status-filter [data-status="rejected"]').click();
    expect(await statuses()).toEqual(Array(t.rejected).fill('rejected'));
    await page.locator('#status-filter [data-status="*"]').click();
    expect(await statuses()).toHaveLength(t.items);
    await page.screenshot({ path: path.resolve('output', 'report-run-screenshot.png'), fullPage: true });
    await page.close();
  });

  it('`kitchen-batch report <out>` regenerates the same page from the journal', async () => {
    const before = pageData(await readFile(path.join(ws.out, 'report.html'), 'utf8'));
    const out = { write: () => true };
    const code = await main(['report', ws.out], { stdout: out, stderr: out, env: {}, cwd: ws.dir });
    expect(code).toBe(1);
    const after = pageData(await readFile(path.join(ws.out, 'report.html'), 'utf8'));
    expect(after).toEqual(before);
  });
});
