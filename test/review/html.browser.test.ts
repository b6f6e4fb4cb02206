/**
 * report.html's "Needs review" view (issue 15), in headless Chromium over a real sandbox run with
 * bad results made on purpose: it lists exactly the flagged results, lowest score first, each with
 * its source and result thumbnails side by side and the reason in words; the other filters narrow
 * it; a run with nothing flagged says so.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Report } from '../../src/types.js';
import { type Workspace, workspace } from '../helpers/batch.js';
import { hasChromium, launchBrowser } from '../helpers/browser.js';

interface ImageGlobals {
  document: { querySelectorAll(s: string): ArrayLike<{ complete: boolean; naturalWidth: number }> };
}

/** The cards shown now: id, flags and score. */
function shownCards(page: Page) {
  return page.locator('#grid .card').evaluateAll((cards) =>
    cards.map((c) => ({
      id: c.getAttribute('data-id'),
      flags: (c.getAttribute('data-flags') ?? '').split(' ').filter(Boolean),
      score: Number(c.querySelector('.review')?.getAttribute('data-review-score')),
      reasons: Array.from(c.querySelectorAll('.review li')).map(
        (li) => (li as { textContent: string | null }).textContent,
      ),
    })),
  );
}

describe.skipIf(!hasChromium())('report.html: the Needs review view, in headless Chromium', () => {
  let ws: Workspace;
  let browser: Browser;
  let report: Report;

  beforeAll(async () => {
    ws = await workspace({
      items: 16,
      look: 'mosaic',
      styles: ['scandinavian', 'industrial'],
      sandbox: { seed: 9 },
    });
    ws.sandbox.setFaults({ badResultRate: 0.5, badResults: ['rotated', 'blank', 'cropped', 'unchanged'] });
    await ws.run({ output: { html: true } });
    report = await ws.report();
    browser = (await launchBrowser())!;
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await ws?.close();
  });

  it('lists the flagged results, lowest score first, with both pictures and the reasons', async () => {
    const flagged = report.items
      .filter((i) => (i.review?.flags.length ?? 0) > 0)
      .sort((a, b) => a.review!.score - b.review!.score || (a.id < b.id ? -1 : 1));
    expect(flagged.length).toBeGreaterThan(2);
    expect(flagged.length).toBe(report.run.totals.needs_review);
    expect(flagged.length).toBeLessThan(report.items.length);

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(pathToFileURL(path.join(ws.out, 'report.html')).href);
    await page.locator('#grid .card').first().waitFor();
    await expect(page.locator('[data-stat="needs_review"] .value').textContent()).resolves.toBe(
      String(flagged.length),
    );
    await expect(page.locator('#review-count').textContent()).resolves.toBe(String(flagged.length));
    // The cards view shows every item; flagged ones carry their reasons there too.
    expect(await page.locator('#grid .card').count()).toBe(report.items.length);
    expect(await page.locator('#grid .card .review').count()).toBe(flagged.length);

    // The header's tile opens the view (the view button does the same).
    await page.locator('[data-stat="needs_review"]').click();
    await expect(page.locator('[data-view="review"]').getAttribute('aria-pressed')).resolves.toBe('true');
    await page.locator('[data-view="cards"]').click();
    await page.locator('[data-view="review"]').click();
    await expect(page.locator('#results-heading').textContent()).resolves.toBe('Needs review');
    const cards = await shownCards(page);
    expect(cards.map((c) => c.id)).toEqual(flagged.map((i) => i.id));
    for (const [n, card] of cards.entries()) {
      const item = flagged[n]!;
      expect(card.flags).toEqual(item.review!.flags);
      expect(card.score).toBe(item.review!.score);
      expect(card.reasons).toHaveLength(item.review!.flags.length);
      for (const reason of card.reasons) expect(reason).toMatch(/^[A-Z][a-z]+( [a-z]+)?: /);
    }
    await expect(page.locator('#summary').textContent()).resolves.toMatch(
      new RegExp(`of ${flagged.length} items worth a look, lowest review score first`),
    );
    // Source and result side by side, both loaded.
    expect(await page.locator('#grid .card img').count()).toBe(2 * flagged.length);
    await page.waitForFunction(() =>
      Array.from((globalThis as unknown as ImageGlobals).document.querySelectorAll('#grid img')).every(
        (img) => img.complete && img.naturalWidth > 0,
      ),
    );
    await page.screenshot({ path: path.resolve('output', 'report-review-screenshot.png'), fullPage: true });

    // The other filters narrow the list: one style only.
    await page.locator('#style-filter').selectOption('v:industrial');
    const industrial = await shownCards(page);
    expect(industrial.map((c) => c.id)).toEqual(
      flagged.filter((i) => i.style === 'industrial').map((i) => i.id),
    );
    // A search that matches no flagged item says so.
    await page.locator('#style-filter').selectOption('*');
    const clean = report.items.find((i) => i.review?.flags.length === 0)!;
    await page.locator('#search').fill(clean.id);
    await page.waitForFunction(
      () => (globalThis as unknown as ImageGlobals).document.querySelectorAll('#grid .card').length === 0,
    );
    await expect(page.locator('#empty').textContent()).resolves.toBe(
      'No results need a look among these items.',
    );
    await expect(page.locator('#empty').isVisible()).resolves.toBe(true);
    await page.close();
  });
});
