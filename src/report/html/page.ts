import { createHash } from 'node:crypto';
import { CLIENT_JS } from './client.js';
import { escapeHtml, formatCount, inlineJson } from './format.js';
import { CSS } from './stylesheet.js';

/** One figure in the header's tile row. */
export interface HeaderTile {
  /** Stable key, exposed as `data-stat` for tests and scripts. */
  key: string;
  label: string;
  value: string;
  /** Status colour of the tile's edge, when it counts a status. */
  tone?: string;
}

/** The header, already formatted for people (the page renders it as static, escaped HTML). */
export interface HeaderModel {
  manifest: string;
  baseUrl: string;
  startedAt: { iso: string; text: string };
  finishedAt: { iso: string; text: string };
  duration: string;
  tiles: HeaderTile[];
  /** Set when the page lists only some of the run's items (a large run): how many, of how many. */
  partial: { shown: number; total: number } | null;
}

/** Builds report.html: static header and controls, then the data block and the script that renders the cards. */
export function renderPage(header: HeaderModel, data: unknown): string {
  const e = escapeHtml;
  // The CSP pins the inline style and script by hash and allows no network at all: even if some
  // value slipped past escaping, it could not run script or call out. `file:` lets the thumbnails
  // load when the page is opened from disk, where Chromium does not count them as 'self'.
  const csp = [
    "default-src 'none'",
    "img-src 'self' file: data:",
    `style-src '${hash(CSS)}'`,
    `script-src '${hash(CLIENT_JS)}'`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  const tiles = header.tiles
    .map(
      (t) =>
        `<li class="tile${t.tone ? ` tile-${e(t.tone)}` : ''}" data-stat="${e(t.key)}">` +
        `<span class="label">${e(t.label)}</span><span class="value">${e(t.value)}</span></li>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${e(csp)}">
<meta name="referrer" content="no-referrer">
<meta name="generator" content="kitchen-batch">
<title>${e(`Report: ${header.manifest}`)} · kitchen-batch</title>
<style>${CSS}</style>
</head>
<body>
<header class="top">
<div class="wrap">
<div class="title"><h1>kitchen-batch report</h1><span class="manifest" title="Manifest">${e(header.manifest)}</span></div>
<dl class="run-meta">
<div><dt>Service</dt><dd class="mono" data-meta="base_url">${e(header.baseUrl)}</dd></div>
<div><dt>Started</dt><dd><time datetime="${e(header.startedAt.iso)}">${e(header.startedAt.text)}</time></dd></div>
<div><dt>Finished</dt><dd><time datetime="${e(header.finishedAt.iso)}">${e(header.finishedAt.text)}</time></dd></div>
<div><dt>Duration</dt><dd data-meta="duration">${e(header.duration)}</dd></div>
</dl>
<ul class="tiles" aria-label="Totals">
${tiles}
</ul>
${
  header.partial
    ? `<p class="partial" role="note" data-meta="partial">This page lists ${e(formatCount(header.partial.shown))} of the ${e(formatCount(header.partial.total))} items: the first ones in manifest order, every item that did not succeed and every result that needs review. The full list is in report.csv and report.json beside this file.</p>\n`
    : ''
}</div>
</header>
<div class="toolbar">
<div class="wrap">
<div class="controls" role="search">
<div class="field field-search"><label for="search">Search by id</label><input id="search" type="search" placeholder="Type part of an id  ( / )" autocomplete="off" spellcheck="false"></div>
<div class="field"><label for="module-filter">Module</label><select id="module-filter"></select></div>
<div class="field"><label for="style-filter">Style</label><select id="style-filter"></select></div>
<div class="field"><span class="sr-only" id="view-label">View</span><div class="segmented" role="group" aria-labelledby="view-label"><button type="button" data-view="cards" aria-pressed="true">Cards</button><button type="button" data-view="errors" aria-pressed="false">Group by error</button><button type="button" data-view="review" aria-pressed="false">Needs review <span class="view-count" id="review-count"></span></button></div></div>
</div>
<div class="chips"><div class="chip-group" id="status-filter" role="group" aria-label="Filter by status"></div><span class="code-filter" id="code-filter" hidden></span><button type="button" class="link-btn" id="reset">Reset filters</button></div>
</div>
</div>
<main class="wrap">
<div class="results-head"><h2 id="results-heading" tabindex="-1">Items</h2><p id="summary" aria-live="polite"></p></div>
<noscript><p class="nojs">This report needs JavaScript to show the items. The same data is in report.json and report.csv beside this file.</p></noscript>
<div class="grid" id="grid"></div>
<div class="groups" id="groups" hidden></div>
<div class="empty" id="empty" hidden>No items match these filters.</div>
<nav class="pager" id="pager" aria-label="Pages" hidden><button type="button" class="btn" id="prev">\u2190 Previous</button><span id="page-label"></span><button type="button" class="btn" id="next">Next \u2192</button></nav>
</main>
<footer class="wrap">Made by kitchen-batch. Thumbnails are in thumbs/, full-size results in results/.</footer>
<script type="application/json" id="report-data">${inlineJson(data)}</script>
<script>${CLIENT_JS}</script>
</body>
</html>
`;
}

/** CSP source for an inline element's exact text. */
function hash(text: string): string {
  return `sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}`;
}
