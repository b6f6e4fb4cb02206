/**
 * The report page's stylesheet, inlined into report.html (no external fonts or files: the page must
 * open from disk offline). System fonts, a calm neutral palette, one colour per status that is
 * always paired with a word and an icon, and a dark variant that follows the OS setting.
 */
export const CSS = String.raw`
:root {
  color-scheme: light dark;
  --bg: #f5f6f8; --surface: #ffffff; --surface-2: #f0f2f5; --text: #18202b; --muted: #566170;
  --border: #e1e5ea; --accent: #2d5f8f; --focus: #1a73e8; --shadow: 0 1px 2px rgba(16,24,40,.06), 0 1px 3px rgba(16,24,40,.08);
  --ok: #17704a; --ok-bg: #e4f3ea; --fail: #b42318; --fail-bg: #fdeceb; --rej: #8f5200; --rej-bg: #fdf1dc;
  --inc: #3550a0; --inc-bg: #e7ecfa; --radius: 12px;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #101419; --surface: #181d24; --surface-2: #20262f; --text: #e7eaee; --muted: #a4adba;
    --border: #2b323c; --accent: #8ab8e6; --focus: #8ab4f8; --shadow: none;
    --ok: #6fd3a0; --ok-bg: #14301f; --fail: #ff9b8f; --fail-bg: #3a1a18; --rej: #f3bd6a; --rej-bg: #35270f;
    --inc: #a9b9f5; --inc-bg: #1d2644;
  }
}
*, *::before, *::after { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--bg); color: var(--text); line-height: 1.5;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
code, .mono { font-family: var(--mono); font-size: .92em; }
.wrap { max-width: 1480px; margin: 0 auto; padding: 0 20px; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; border-radius: 6px; }
[hidden] { display: none !important; }
.muted { color: var(--muted); }
.sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden; clip: rect(0,0,0,0); border: 0; }

/* header */
.top { background: var(--surface); border-bottom: 1px solid var(--border); padding: 24px 0 20px; }
.title { display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 14px; margin: 0 0 4px; }
.title h1 { font-size: 1.45rem; line-height: 1.25; margin: 0; letter-spacing: -.01em; }
.title .manifest { font-family: var(--mono); color: var(--muted); overflow-wrap: anywhere; }
.run-meta { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 4px 24px; margin: 12px 0 18px; }
.run-meta div { min-width: 0; }
.run-meta dt { font-size: .78rem; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
.run-meta dd { margin: 0; overflow-wrap: anywhere; }
/* Flex, not grid: the 11 tiles share one row on a desktop and wrap evenly on smaller screens. */
.tiles { display: flex; flex-wrap: wrap; gap: 10px; margin: 0; padding: 0; list-style: none; }
.tile { flex: 1 1 104px; background: var(--surface-2); border-radius: 10px; padding: 10px 14px; border-left: 4px solid transparent; }
.tile .label { display: block; font-size: .8rem; color: var(--muted); }
.tile .value { display: block; font-size: 1.35rem; font-weight: 650; font-variant-numeric: tabular-nums; line-height: 1.3; }
.tile-succeeded { border-left-color: var(--ok); } .tile-failed { border-left-color: var(--fail); }
.tile-rejected { border-left-color: var(--rej); } .tile-incomplete { border-left-color: var(--inc); }

/* toolbar */
.toolbar { background: color-mix(in srgb, var(--bg) 92%, transparent); backdrop-filter: blur(6px); border-bottom: 1px solid var(--border); padding: 12px 0; z-index: 5; }
@media (min-width: 760px) { .toolbar { position: sticky; top: 0; } }
.controls { display: flex; flex-wrap: wrap; gap: 10px 14px; align-items: end; }
.field { display: flex; flex-direction: column; gap: 3px; min-width: 0; }
.field label { font-size: .8rem; color: var(--muted); font-weight: 550; }
.field-search { flex: 1 1 240px; }
input[type="search"], select {
  font: inherit; color: var(--text); background: var(--surface); border: 1px solid var(--border);
  border-radius: 8px; padding: 7px 10px; min-height: 38px; max-width: 100%;
}
input[type="search"]:hover, select:hover { border-color: color-mix(in srgb, var(--muted) 50%, var(--border)); }
.segmented { display: inline-flex; border: 1px solid var(--border); border-radius: 9px; padding: 2px; background: var(--surface); }
.segmented button { font: inherit; border: 0; background: transparent; color: var(--muted); padding: 6px 12px; border-radius: 7px; cursor: pointer; min-height: 32px; }
.segmented button[aria-pressed="true"] { background: var(--surface-2); color: var(--text); font-weight: 600; box-shadow: var(--shadow); }
.chips { display: flex; flex-wrap: wrap; gap: 8px 12px; margin-top: 10px; align-items: center; }
.chip-group { display: flex; flex-wrap: wrap; gap: 6px; }
.chip {
  font: inherit; font-size: .88rem; display: inline-flex; align-items: center; gap: 6px; cursor: pointer;
  border: 1px solid var(--border); background: var(--surface); color: var(--text); border-radius: 999px; padding: 4px 12px; min-height: 32px;
}
.chip:hover { border-color: var(--muted); }
.chip[aria-pressed="true"] { background: var(--text); color: var(--surface); border-color: var(--text); }
.chip-count { font-variant-numeric: tabular-nums; opacity: .75; }
.dot { width: 8px; height: 8px; border-radius: 50%; background: currentColor; }
.chip-succeeded .dot { background: var(--ok); } .chip-failed .dot { background: var(--fail); }
.chip-rejected .dot { background: var(--rej); } .chip-incomplete .dot { background: var(--inc); }
.btn, .link-btn {
  font: inherit; font-size: .88rem; cursor: pointer; border-radius: 8px; min-height: 34px; padding: 5px 12px;
  border: 1px solid var(--border); background: var(--surface); color: var(--text);
}
.btn:hover { border-color: var(--muted); }
.btn:disabled { opacity: .45; cursor: default; }
.link-btn { border-color: transparent; background: transparent; color: var(--accent); text-decoration: underline; text-underline-offset: 2px; }
.code-filter { display: inline-flex; align-items: center; gap: 6px; background: var(--surface-2); border-radius: 999px; padding: 2px 4px 2px 12px; font-size: .88rem; }
.chip-x { font: inherit; border: 0; background: transparent; color: var(--text); cursor: pointer; width: 26px; height: 26px; border-radius: 50%; font-size: 1.05rem; line-height: 1; }
.chip-x:hover { background: var(--border); }

/* results */
main { padding: 18px 0 40px; }
.results-head { display: flex; flex-wrap: wrap; justify-content: space-between; align-items: baseline; gap: 6px 14px; margin-bottom: 14px; }
.results-head h2 { font-size: 1rem; margin: 0; font-weight: 600; }
#summary { margin: 0; color: var(--muted); font-variant-numeric: tabular-nums; }
.grid { display: grid; gap: 16px; grid-template-columns: repeat(auto-fill, minmax(min(100%, 300px), 1fr)); }
.card { background: var(--surface); border: 1px solid var(--border); border-radius: var(--radius); overflow: hidden; box-shadow: var(--shadow); display: flex; flex-direction: column; }
.card[data-status="failed"] { border-top: 3px solid var(--fail); } .card[data-status="rejected"] { border-top: 3px solid var(--rej); }
.card[data-status="incomplete"] { border-top: 3px solid var(--inc); } .card[data-status="succeeded"] { border-top: 3px solid var(--ok); }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 2px; background: var(--border); }
.pair figure { margin: 0; position: relative; background: var(--surface-2); }
.pair img, .ph { display: block; width: 100%; height: auto; aspect-ratio: 4 / 3; object-fit: cover; }
.pair figcaption {
  position: absolute; left: 6px; bottom: 6px; font-size: .7rem; letter-spacing: .05em; text-transform: uppercase;
  background: rgba(17,22,29,.72); color: #fff; padding: 1px 7px; border-radius: 999px; pointer-events: none;
}
.full { display: block; color: inherit; text-decoration: none; }
.full:hover img { filter: brightness(1.06); }
.ph { display: flex; align-items: center; justify-content: center; padding: 10px; text-align: center; color: var(--muted); font-size: .85rem;
  background: repeating-linear-gradient(135deg, var(--surface-2) 0 10px, color-mix(in srgb, var(--surface-2) 70%, var(--border)) 10px 20px); }
.ph span { background: var(--surface); border-radius: 6px; padding: 2px 8px; }
.card-body { padding: 12px 14px 14px; display: flex; flex-direction: column; gap: 6px; }
.card-head { display: flex; align-items: start; justify-content: space-between; gap: 10px; }
.id { font-family: var(--mono); font-size: .9rem; font-weight: 600; margin: 0; overflow-wrap: anywhere; line-height: 1.35; }
.meta { margin: 0; color: var(--muted); font-size: .85rem; display: flex; flex-wrap: wrap; gap: 2px 0; }
.meta span:not(:last-child)::after { content: "\00B7"; margin: 0 7px; }
.badge { flex: none; font-size: .76rem; font-weight: 650; border-radius: 999px; padding: 2px 9px; white-space: nowrap; }
.badge-succeeded { color: var(--ok); background: var(--ok-bg); } .badge-failed { color: var(--fail); background: var(--fail-bg); }
.badge-rejected { color: var(--rej); background: var(--rej-bg); } .badge-incomplete { color: var(--inc); background: var(--inc-bg); }
.dup { margin: 0; font-size: .82rem; color: var(--rej); }
.review { border-radius: 8px; padding: 8px 10px; font-size: .86rem; background: var(--rej-bg); border-left: 3px solid var(--rej); }
.review p { margin: 0; overflow-wrap: anywhere; }
.review ul { margin: 4px 0 0; padding-left: 18px; }
.review .score { font-family: var(--mono); color: var(--muted); font-size: .82rem; }
.view-count { font-variant-numeric: tabular-nums; color: var(--muted); }
.tile-link { cursor: pointer; border-left-color: var(--rej); }
.tile-link:hover { background: var(--rej-bg); }
.pre { margin: 0; font-size: .82rem; color: var(--muted, #555); }
.err { border-radius: 8px; padding: 8px 10px; font-size: .86rem; background: var(--surface-2); border-left: 3px solid var(--muted); }
.err-failed { border-left-color: var(--fail); } .err-rejected { border-left-color: var(--rej); } .err-incomplete { border-left-color: var(--inc); }
.err p { margin: 0; overflow-wrap: anywhere; }
.err code { font-weight: 600; }
.hint { color: var(--muted); margin-top: 4px !important; }
.hint strong { color: var(--text); font-weight: 600; }
.empty { text-align: center; padding: 48px 16px; color: var(--muted); background: var(--surface); border: 1px dashed var(--border); border-radius: var(--radius); }
.pager { display: flex; justify-content: center; align-items: center; gap: 14px; margin-top: 22px; }
#page-label { font-variant-numeric: tabular-nums; color: var(--muted); }

/* group by error */
.groups { display: grid; gap: 12px; }
.group { background: var(--surface); border: 1px solid var(--border); border-radius: var(--radius); padding: 14px 16px; box-shadow: var(--shadow); }
.group-head { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 12px; }
.group-head h3 { margin: 0; font-size: 1rem; }
.group-count { font-weight: 600; font-variant-numeric: tabular-nums; }
.group-badges { display: inline-flex; gap: 6px; }
.group p { margin: 6px 0 0; overflow-wrap: anywhere; }
.ids { list-style: none; padding: 0; margin: 10px 0; display: flex; flex-wrap: wrap; gap: 4px 6px; max-height: 9.5em; overflow: auto; }
.ids li { font-family: var(--mono); font-size: .8rem; background: var(--surface-2); border-radius: 6px; padding: 1px 7px; overflow-wrap: anywhere; }
.ids li.more { font-family: inherit; background: transparent; color: var(--muted); }

footer { color: var(--muted); font-size: .8rem; padding: 0 0 28px; }
.nojs { padding: 16px; background: var(--rej-bg); color: var(--text); border-radius: 8px; }
.partial { margin: 12px 0 0; padding: 8px 12px; background: var(--rej-bg); color: var(--text); border-radius: 8px; font-size: 14px; }
html.js .nojs { display: none; }
@media (max-width: 560px) {
  .wrap { padding: 0 14px; }
  .top { padding: 18px 0 14px; }
  .title h1 { font-size: 1.25rem; }
  .run-meta { grid-template-columns: 1fr 1fr; gap: 6px 16px; margin: 10px 0 14px; }
  .run-meta div:first-child { grid-column: 1 / -1; }
  .tiles { gap: 6px; }
  .tile { flex-basis: 30%; padding: 6px 10px; border-left-width: 3px; }
  .tile .label { font-size: .72rem; }
  .tile .value { font-size: 1.05rem; }
  .controls .field:not(.field-search) { flex: 1 1 40%; }
  .controls select { width: 100%; }
  .controls .field:last-child { flex-basis: 100%; }
  .segmented button { flex: 1; }
}
`;
