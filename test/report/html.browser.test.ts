import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeHtmlReport } from '../../src/report/html/index.js';
import { hasChromium, launchBrowser } from '../helpers/browser.js';
import { tempDir, useTempDir } from '../helpers/tmp.js';
import {
  buildSyntheticFixture,
  EVIL_ID,
  loadReportFixture,
  type ReportFixture,
  scaleReport,
} from './fixture.js';

/** The few browser globals the page-side callbacks use. */
interface PageGlobals {
  document: {
    querySelectorAll(selector: string): ArrayLike<{ complete: boolean }>;
    getElementById(id: string): unknown;
    activeElement: { id: string } | null;
    documentElement: { scrollWidth: number };
  };
  getComputedStyle(element: unknown): { gridTemplateColumns: string };
  scrollTo(x: number, y: number): void;
}

/** Screenshots land in the repo's output/ folder (cwd is the repo root under vitest). */
const SHOTS = path.resolve('output');

describe.skipIf(!hasChromium())('report.html in headless Chromium', () => {
  const root = useTempDir('kb-html-browser-', 'suite');
  let fx: ReportFixture;
  let url: string;
  let browser: Browser;
  /** Console errors, page errors and dialogs: a CSP violation or an injected alert() shows up here. */
  const problems: string[] = [];

  beforeAll(async () => {
    fx = await loadReportFixture(root.dir);
    const { file } = await writeHtmlReport({
      outDir: fx.outDir,
      report: fx.report,
      sourcePath: fx.sourcePath,
    });
    url = pathToFileURL(file).href;
    const launched = await launchBrowser();
    if (!launched) throw new Error('Chromium vanished between the check and the launch');
    browser = launched;
    await mkdir(SHOTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function open(width = 1440, height = 900): Promise<Page> {
    const page = await browser.newPage({ viewport: { width, height } });
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('dialog', (d) => {
      problems.push(`dialog: ${d.message()}`);
      void d.dismiss();
    });
    await page.goto(url);
    await page.locator('#grid .card').first().waitFor();
    return page;
  }

  const cardCount = (page: Page) => page.locator('#grid .card').count();
  const cardStatuses = (page: Page) =>
    page.locator('#grid .card').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-status')));
  const cardIds = (page: Page) =>
    page.locator('#grid .card').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-id')));

  // Page-side callbacks reach browser globals through `globalThis` with the small type below: the
  // project's tsconfig has no DOM lib (it is a Node CLI), and string expressions would need
  // 'unsafe-eval', which the page's CSP rightly forbids.
  const waitForCards = (page: Page, n: number) =>
    page.waitForFunction(
      (count) =>
        (globalThis as unknown as PageGlobals).document.querySelectorAll('#grid .card').length === count,
      n,
    );
  const waitForImages = (page: Page) =>
    page.waitForFunction(() =>
      Array.from((globalThis as unknown as PageGlobals).document.querySelectorAll('#grid img')).every(
        (img) => img.complete,
      ),
    );
  const gridColumns = (page: Page) =>
    page.evaluate(() => {
      const w = globalThis as unknown as PageGlobals;
      return w.getComputedStyle(w.document.getElementById('grid')).gridTemplateColumns.split(' ').length;
    });

  it('shows the totals of the report', async () => {
    const page = await open();
    const totals = fx.report.run.totals;
    for (const key of [
      'items',
      'succeeded',
      'failed',
      'rejected',
      'incomplete',
      'possible_duplicates',
      'needs_review',
    ] as const) {
      await expect(page.locator(`[data-stat="${key}"] .value`).textContent()).resolves.toBe(
        totals[key].toLocaleString('en-US'),
      );
    }
    await expect(page.locator('[data-meta="base_url"]').textContent()).resolves.toBe(fx.report.run.base_url);
    expect(await cardCount(page)).toBe(Math.min(60, fx.report.items.length));
    await page.close();
  });

  it('loads every thumbnail it shows, and shows placeholders for the rest', async () => {
    const page = await open();
    const images = page.locator('#grid img');
    const n = await images.count();
    expect(n).toBeGreaterThan(0);
    // loading="lazy": bring each into view, then wait for it to decode.
    for (let i = 0; i < n; i++) await images.nth(i).scrollIntoViewIfNeeded();
    await waitForImages(page);
    const widths = await images.evaluateAll((imgs) =>
      imgs.map((img) => ({
        alt: img.getAttribute('alt') ?? '',
        w: (img as unknown as { naturalWidth: number }).naturalWidth,
      })),
    );
    expect(widths.filter((x) => x.w === 0)).toEqual([]);
    for (const { alt } of widths) expect(alt).toMatch(/^(before|after): /);
    // Missing source, corrupt source, deleted result: words instead of a broken image.
    await expect(page.locator('[aria-label^="before: missing__modern"]').textContent()).resolves.toBe(
      'No source image',
    );
    await expect(page.locator('[aria-label^="before: broken__modern"]').count()).resolves.toBe(1);
    await expect(page.locator('[aria-label^="after: k3__modern"]').textContent()).resolves.toBe(
      'Result missing',
    );
    // The result links to the full-size file, relatively.
    await expect(page.locator('[data-id="k1__scandinavian"] a.full').getAttribute('href')).resolves.toBe(
      'results/k1__scandinavian.jpg',
    );
    await page.close();
  });

  it('shows a hostile id as text and runs nothing from the data', async () => {
    const page = await open();
    const card = page
      .locator('#grid .card')
      .filter({ has: page.locator('h3', { hasText: 'evil</script>' }) });
    await expect(card.locator('h3').textContent()).resolves.toBe(EVIL_ID);
    await expect(card.locator('.err-line').textContent()).resolves.toContain('<b>markup</b>');
    await expect(page.locator('img[src="x"]').count()).resolves.toBe(0);
    await page.close();
    expect(problems).toEqual([]);
  });

  it('filters by status, and shows errors with a hint', async () => {
    const page = await open();
    await page.locator('#status-filter [data-status="failed"]').click();
    expect(await cardStatuses(page)).toEqual(Array(fx.report.run.totals.failed).fill('failed'));
    await expect(
      page.locator('#status-filter [data-status="failed"]').getAttribute('aria-pressed'),
    ).resolves.toBe('true');
    await page.locator('#status-filter [data-status="rejected"]').click();
    expect(await cardStatuses(page)).toEqual(Array(fx.report.run.totals.rejected).fill('rejected'));
    await expect(page.locator('[data-id="k4__boho"] .hint').textContent()).resolves.toContain(
      'kitchen-batch styles',
    );
    await page.locator('#status-filter [data-status="incomplete"]').click();
    await expect(page.locator('[data-id="k1__modern"] .hint').textContent()).resolves.toContain(
      'Rerun the same command to continue',
    );
    await page.locator('#status-filter [data-status="*"]').click();
    expect(await cardCount(page)).toBe(fx.report.items.length);
    await page.close();
  });

  it('filters by module and style, and searches by id', async () => {
    const page = await open();
    await page.locator('#module-filter').selectOption({ label: 'kitchen-configurator' });
    expect(await cardIds(page)).toEqual(
      fx.report.items.filter((i) => i.module === 'kitchen-configurator').map((i) => i.id),
    );
    await page.locator('#module-filter').selectOption({ label: 'All modules' });
    await page.locator('#style-filter').selectOption({ label: 'industrial' });
    expect(await cardIds(page)).toEqual(
      fx.report.items.filter((i) => i.style === 'industrial').map((i) => i.id),
    );
    await page.locator('#style-filter').selectOption({ label: 'All styles' });

    await page.locator('#search').fill('K1__');
    const expected = fx.report.items.filter((i) => i.id.includes('k1__')).map((i) => i.id);
    await waitForCards(page, expected.length);
    expect(await cardIds(page)).toEqual(expected);
    await page.locator('#search').fill('no-such-item');
    await page.locator('#empty').waitFor();
    expect(await cardCount(page)).toBe(0);
    await page.locator('#reset').click();
    expect(await cardCount(page)).toBe(fx.report.items.length);
    await page.close();
  });

  it('groups by error code with counts and ids, and jumps from a group to its cards', async () => {
    const page = await open();
    await page.locator('[data-view="errors"]').click();
    const shown = await page
      .locator('#groups .group')
      .evaluateAll((groups) =>
        groups.map((g) => [
          g.getAttribute('data-code'),
          Number(g.querySelector('[data-count]')?.getAttribute('data-count')),
        ]),
      );
    const expected = new Map<string, number>();
    for (const i of fx.report.items)
      if (i.error) expected.set(i.error.code, (expected.get(i.error.code) ?? 0) + 1);
    expect(new Map(shown as Array<[string, number]>)).toEqual(expected);
    const failedGroup = page.locator('#groups .group[data-code="generation_failed"]');
    await expect(failedGroup.locator('.ids li').allTextContents()).resolves.toEqual(['k3__rustic', EVIL_ID]);
    await page.screenshot({ path: path.join(SHOTS, 'report-screenshot-errors.png'), fullPage: true });
    await failedGroup.locator('button').click();
    expect(await cardIds(page)).toEqual(['k3__rustic', EVIL_ID]);
    await page.locator('#code-filter button').click();
    expect(await cardCount(page)).toBe(fx.report.items.length);
    await page.close();
  });

  it('is keyboard navigable', async () => {
    const page = await open();
    await page.keyboard.press('/');
    await expect(
      page.evaluate(() => (globalThis as unknown as PageGlobals).document.activeElement?.id),
    ).resolves.toBe('search');
    await page.keyboard.type('broken');
    await waitForCards(page, 1);
    await page.keyboard.press('Escape');
    await waitForCards(page, fx.report.items.length);
    await page.close();
  });

  it('looks right on desktop and on a phone (screenshots in output/)', async () => {
    const desktop = await open(1440, 900);
    await desktop.locator('#grid img').last().scrollIntoViewIfNeeded();
    await desktop.evaluate(() => (globalThis as unknown as PageGlobals).scrollTo(0, 0));
    await waitForImages(desktop);
    await desktop.screenshot({ path: path.join(SHOTS, 'report-screenshot.png'), fullPage: true });
    const columns = await gridColumns(desktop);
    expect(columns).toBeGreaterThanOrEqual(4);
    await desktop.close();

    const phone = await open(390, 844);
    const phoneColumns = await gridColumns(phone);
    expect(phoneColumns).toBe(1);
    // Nothing wider than the screen.
    await expect(
      phone.evaluate(() => (globalThis as unknown as PageGlobals).document.documentElement.scrollWidth),
    ).resolves.toBeLessThanOrEqual(390);
    await phone.screenshot({ path: path.join(SHOTS, 'report-screenshot-phone.png') });
    await phone.close();
  });

  it('renders the first page of 10,000 items quickly and pages through them', async () => {
    const bigRoot = await tempDir('kb-html-big-');
    try {
      const big = scaleReport(await buildSyntheticFixture(bigRoot.dir), 10_000);
      const written = await writeHtmlReport({
        outDir: big.outDir,
        report: big.report,
        sourcePath: big.sourcePath,
      });
      expect(written.thumbnails).toBeLessThanOrEqual(8); // shared, not 10,000
      const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
      const started = Date.now();
      await page.goto(pathToFileURL(written.file).href);
      await page.locator('#grid .card').first().waitFor();
      const elapsed = Date.now() - started;
      expect(elapsed).toBeLessThan(10_000);
      expect(await cardCount(page)).toBe(60);
      await expect(page.locator('#summary').textContent()).resolves.toBe('Showing 1–60 of 10,000 items');
      await expect(page.locator('[data-stat="items"] .value').textContent()).resolves.toBe('10,000');
      await page.locator('#next').click();
      await expect(page.locator('#summary').textContent()).resolves.toBe('Showing 61–120 of 10,000 items');
      await expect(page.locator('#page-label').textContent()).resolves.toBe('Page 2 of 167');
      await page.locator('#search').fill('bulk-09999');
      await waitForCards(page, 1);
      await page.locator('#search').fill('');
      await waitForCards(page, 60);
      await page.locator('[data-view="errors"]').click();
      await expect(page.locator('#groups .group').count()).resolves.toBeGreaterThan(3);
      await page.close();
    } finally {
      await bigRoot.remove();
    }
  });

  // Last on purpose: covers every page opened above (a CSP violation is logged as a console error).
  it('logged no script errors, CSP violations or dialogs', () => {
    expect(problems).toEqual([]);
  });
});
