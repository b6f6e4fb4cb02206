/**
 * The report page's script, inlined into report.html. Plain ES2019 in a string, not a bundled
 * module: the page must open from disk with no server and no build step, and a string survives
 * both `tsc` and the test transformer unchanged (Function#toString output differs between them).
 *
 * Rules it keeps: data comes only from the JSON block and reaches the DOM only through
 * `textContent` / `setAttribute` (never innerHTML), and at most one page of cards exists at once
 * so 10,000 items stay fast.
 */
export const CLIENT_JS = String.raw`(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent || '{}');
  var items = data.items || [];
  var hints = data.hints || {};
  var PAGE_SIZE = data.pageSize || 60;
  var STATUSES = ['succeeded', 'failed', 'rejected', 'incomplete'];
  var LABEL = { succeeded: 'Succeeded', failed: 'Failed', rejected: 'Rejected', incomplete: 'Incomplete' };
  var ICON = { succeeded: '\u2713', failed: '\u2715', rejected: '\u2298', incomplete: '\u25F7' };
  var ALL = '*';
  // The review's flags in words: why a result is worth a look (docs/contract.md#review).
  var FLAG_WORDS = {
    layout_changed: 'Layout changed: cabinets, window or worktop are not where the source has them',
    rotated: 'Rotated: the result is turned against the source',
    mirrored: 'Mirrored: the result is the source flipped left to right',
    aspect_changed: 'Aspect changed: cropped or stretched to another width:height',
    blank: 'Blank: nearly one colour, no picture',
    transparent: 'Transparent: mostly see-through',
    unchanged: 'Unchanged: nearly identical to the source, the style was not applied',
    duplicate: "Duplicate: the same picture as another item's result",
  };
  var state = { status: ALL, module: ALL, style: ALL, q: '', code: null, view: 'cards', page: 0 };

  items.forEach(function (it) { it.idLower = String(it.id).toLowerCase(); });
  function flagged(it) { return !!(it.rv && it.rv.flags.length > 0); }
  var flaggedCount = items.filter(flagged).length;

  function byId(id) { return document.getElementById(id); }

  /** Builds an element; props.text sets textContent, on* props add listeners, others are attributes. */
  function h(tag, props, children) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (key) {
        var value = props[key];
        if (value === null || value === undefined || value === false) return;
        if (key === 'text') node.textContent = String(value);
        else if (key === 'class') node.className = value;
        else if (key.slice(0, 2) === 'on') node.addEventListener(key.slice(2), value);
        else node.setAttribute(key, value === true ? '' : String(value));
      });
    }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined || child === false) return;
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    });
    return node;
  }

  function fmtMs(ms) {
    if (ms === null || ms === undefined) return '\u2014';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    var s = Math.round(ms / 1000);
    return Math.floor(s / 60) + ' min ' + String(s % 60).padStart(2, '0') + ' s';
  }
  function fmtCount(n) { return n.toLocaleString('en-US'); }
  function plural(n, one, many) { return fmtCount(n) + ' ' + (n === 1 ? one : many); }
  function hintFor(it) {
    if (!it.error) return null;
    return hints[it.error.code] || hints['status:' + it.status] || null;
  }

  function matches(it, ignoreCode) {
    if (state.status !== ALL && it.status !== state.status) return false;
    if (state.module !== ALL && it.module !== state.module) return false;
    if (state.style !== ALL && (it.style === null ? '' : it.style) !== state.style) return false;
    if (!ignoreCode && state.code !== null && (!it.error || it.error.code !== state.code)) return false;
    if (state.q && it.idLower.indexOf(state.q) === -1) return false;
    return true;
  }

  // ---- controls -------------------------------------------------------------------------

  var statusBar = byId('status-filter');
  var counts = { '*': items.length };
  STATUSES.forEach(function (s) { counts[s] = 0; });
  items.forEach(function (it) { counts[it.status] = (counts[it.status] || 0) + 1; });
  [ALL].concat(STATUSES).forEach(function (s) {
    var label = s === ALL ? 'All' : LABEL[s];
    statusBar.appendChild(h('button', {
      type: 'button', class: 'chip' + (s === ALL ? '' : ' chip-' + s), 'data-status': s,
      'aria-pressed': String(s === state.status),
      onclick: function () { state.status = s; state.page = 0; render(); },
    }, [
      s === ALL ? null : h('span', { class: 'dot', 'aria-hidden': 'true' }),
      label + ' ',
      h('span', { class: 'chip-count', text: fmtCount(counts[s] || 0) }),
    ]));
  });

  function fillSelect(select, values, allLabel, noneLabel) {
    select.appendChild(h('option', { value: ALL, text: allLabel }));
    values.forEach(function (v) {
      select.appendChild(h('option', { value: 'v:' + v, text: v === '' ? noneLabel : v }));
    });
    // Hide a filter that cannot narrow anything, so the toolbar stays calm.
    if (values.length < 2) select.closest('.field').hidden = true;
  }
  function uniqueSorted(key) {
    var seen = {};
    items.forEach(function (it) { seen[it[key] === null ? '' : it[key]] = true; });
    return Object.keys(seen).sort();
  }
  var moduleSelect = byId('module-filter');
  var styleSelect = byId('style-filter');
  fillSelect(moduleSelect, uniqueSorted('module'), 'All modules', '(none)');
  fillSelect(styleSelect, uniqueSorted('style'), 'All styles', '(no style)');
  function selectValue(select) { return select.value === ALL ? ALL : select.value.slice(2); }
  moduleSelect.addEventListener('change', function () { state.module = selectValue(moduleSelect); state.page = 0; render(); });
  styleSelect.addEventListener('change', function () { state.style = selectValue(styleSelect); state.page = 0; render(); });

  var search = byId('search');
  var searchTimer = 0;
  search.addEventListener('input', function () {
    // Debounced: filtering 10,000 ids per keystroke is cheap, re-rendering a page per keystroke is not.
    clearTimeout(searchTimer);
    searchTimer = setTimeout(function () { state.q = search.value.trim().toLowerCase(); state.page = 0; render(); }, 120);
  });
  search.addEventListener('keydown', function (event) {
    if (event.key === 'Escape' && search.value) { search.value = ''; state.q = ''; state.page = 0; render(); }
  });
  document.addEventListener('keydown', function (event) {
    var tag = event.target && event.target.tagName;
    if (event.key === '/' && tag !== 'INPUT' && tag !== 'SELECT' && tag !== 'TEXTAREA') {
      event.preventDefault();
      search.focus();
    }
  });

  var viewButtons = document.querySelectorAll('[data-view]');
  viewButtons.forEach(function (button) {
    button.addEventListener('click', function () { state.view = button.getAttribute('data-view'); render(); });
  });

  byId('reset').addEventListener('click', function () {
    state = { status: ALL, module: ALL, style: ALL, q: '', code: null, view: state.view, page: 0 };
    search.value = ''; moduleSelect.value = ALL; styleSelect.value = ALL;
    render();
  });

  // ---- cards ----------------------------------------------------------------------------

  function placeholder(label, words) {
    return h('div', { class: 'ph', role: 'img', 'aria-label': label }, [h('span', { text: words })]);
  }
  function thumb(src, alt, missingWords) {
    if (!src) return placeholder(alt + ' (' + missingWords.toLowerCase() + ')', missingWords);
    var img = h('img', { src: src, alt: alt, loading: 'lazy', decoding: 'async', width: 320, height: 240 });
    img.addEventListener('error', function () {
      img.replaceWith(placeholder(alt + ' (thumbnail missing)', 'Thumbnail missing'));
    });
    return img;
  }
  function badge(status) {
    return h('span', { class: 'badge badge-' + status }, [
      h('span', { 'aria-hidden': 'true', text: ICON[status] + ' ' }), LABEL[status] || status,
    ]);
  }

  function card(it) {
    var before = thumb(it.src, 'before: ' + it.id, 'No source image');
    var afterMissing = it.status === 'succeeded' ? 'Result missing'
      : it.status === 'rejected' ? 'Not submitted' : 'No result';
    var after = thumb(it.out, 'after: ' + it.id, afterMissing);
    if (it.href) {
      after = h('a', {
        href: it.href, target: '_blank', rel: 'noopener', class: 'full',
        title: 'Open the full-size result',
      }, [after]);
    }
    var meta = [h('span', { text: it.module })];
    if (it.style !== null) meta.push(h('span', { text: it.style }));
    // No time for items the service never finished: a dash there would read like a value.
    if (it.ms !== null) meta.push(h('span', { title: 'Processing time', text: fmtMs(it.ms) }));
    var body = [
      h('div', { class: 'card-head' }, [h('h3', { class: 'id', text: it.id }), badge(it.status)]),
      h('p', { class: 'meta' }, meta),
    ];
    // Only a send after an unknown outcome may have charged twice; a deliberate resubmission
    // (--retry-failed) counts in submissions but is no duplicate.
    if (it.dup) {
      body.push(h('p', { class: 'dup', text: 'Submitted ' + it.submissions + ' times, ' + it.dup + ' after an unknown outcome: possible duplicate charge' }));
    } else if (it.submissions > 1) {
      body.push(h('p', { class: 'meta', text: 'Submitted ' + it.submissions + ' times' }));
    }
    if (it.pre) {
      body.push(h('p', { class: 'pre', title: 'What preflight did to the upload' }, ['Uploaded: ' + it.pre.join(', ')]));
    }
    if (flagged(it)) {
      body.push(h('div', { class: 'review', 'data-review-score': it.rv.score }, [
        h('p', null, [h('strong', { text: 'Worth a look ' }), h('span', { class: 'score', text: 'score ' + it.rv.score.toFixed(2) })]),
        h('ul', null, it.rv.flags.map(function (f) {
          return h('li', { 'data-flag': f, text: FLAG_WORDS[f] || f });
        })),
      ]));
    }
    if (it.error) {
      var hint = hintFor(it);
      body.push(h('div', { class: 'err err-' + it.status }, [
        h('p', { class: 'err-line' }, [h('code', { text: it.error.code }), ' ', it.error.message]),
        hint ? h('p', { class: 'hint' }, [h('strong', { text: 'How to fix: ' }), hint]) : null,
      ]));
    }
    return h('article', { class: 'card', 'data-status': it.status, 'data-id': it.id, 'data-flags': flagged(it) ? it.rv.flags.join(' ') : null }, [
      h('div', { class: 'pair' }, [
        h('figure', null, [before, h('figcaption', { text: 'Before' })]),
        h('figure', null, [after, h('figcaption', { text: 'After' })]),
      ]),
      h('div', { class: 'card-body' }, body),
    ]);
  }

  var grid = byId('grid');
  var groups = byId('groups');
  var summary = byId('summary');
  var pager = byId('pager');
  var empty = byId('empty');

  function renderCards(list, what) {
    var pages = Math.max(1, Math.ceil(list.length / PAGE_SIZE));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    var start = state.page * PAGE_SIZE;
    var slice = list.slice(start, start + PAGE_SIZE);
    var fragment = document.createDocumentFragment();
    slice.forEach(function (it) { fragment.appendChild(card(it)); });
    grid.replaceChildren(fragment);
    var none = what === 'review' ? 'No results need a look among these items.' : 'No items match these filters.';
    summary.textContent = list.length === 0 ? none
      : 'Showing ' + fmtCount(start + 1) + '\u2013' + fmtCount(start + slice.length) + ' of ' + plural(list.length, 'item', 'items') +
        (what === 'review' ? ' worth a look, lowest review score first' : '');
    empty.textContent = none;
    empty.hidden = list.length !== 0;
    pager.hidden = pages < 2;
    byId('page-label').textContent = 'Page ' + fmtCount(state.page + 1) + ' of ' + fmtCount(pages);
    byId('prev').disabled = state.page === 0;
    byId('next').disabled = state.page >= pages - 1;
  }

  // ---- group by error -------------------------------------------------------------------

  var ID_LIMIT = 60;
  function renderGroups(list) {
    var byCode = {};
    var order = [];
    list.forEach(function (it) {
      if (!it.error) return;
      var g = byCode[it.error.code];
      if (!g) { g = byCode[it.error.code] = { code: it.error.code, items: [], statuses: {} }; order.push(g); }
      g.items.push(it);
      g.statuses[it.status] = true;
    });
    order.sort(function (a, b) { return b.items.length - a.items.length || (a.code < b.code ? -1 : 1); });
    var withErrors = order.reduce(function (n, g) { return n + g.items.length; }, 0);
    summary.textContent = order.length === 0 ? 'No errors among these items.'
      : plural(order.length, 'error code', 'error codes') + ' across ' + plural(withErrors, 'item', 'items');
    empty.hidden = true;
    pager.hidden = true;
    var fragment = document.createDocumentFragment();
    order.forEach(function (g) {
      var first = g.items[0];
      var hint = hintFor(first);
      var ids = h('ul', { class: 'ids', 'aria-label': 'Item ids with ' + g.code });
      g.items.slice(0, ID_LIMIT).forEach(function (it) { ids.appendChild(h('li', { text: it.id })); });
      if (g.items.length > ID_LIMIT) {
        ids.appendChild(h('li', { class: 'more', text: 'and ' + fmtCount(g.items.length - ID_LIMIT) + ' more' }));
      }
      fragment.appendChild(h('section', { class: 'group', 'data-code': g.code }, [
        h('div', { class: 'group-head' }, [
          h('h3', null, [h('code', { text: g.code })]),
          h('span', { class: 'group-count', 'data-count': g.items.length, text: plural(g.items.length, 'item', 'items') }),
          h('span', { class: 'group-badges' }, STATUSES.filter(function (s) { return g.statuses[s]; }).map(badge)),
        ]),
        h('p', { class: 'group-msg' }, [h('span', { class: 'muted', text: 'Message: ' }), first.error.message]),
        hint ? h('p', { class: 'hint' }, [h('strong', { text: 'How to fix: ' }), hint]) : null,
        ids,
        h('button', {
          type: 'button', class: 'btn',
          onclick: function () { state.code = g.code; state.view = 'cards'; state.page = 0; render(); focusResults(); },
        }, ['Show ' + plural(g.items.length, 'card', 'cards')]),
      ]));
    });
    groups.replaceChildren(fragment);
  }

  // ---- wiring ---------------------------------------------------------------------------

  var codeChip = byId('code-filter');
  function render() {
    statusBar.querySelectorAll('[data-status]').forEach(function (b) {
      b.setAttribute('aria-pressed', String(b.getAttribute('data-status') === state.status));
    });
    viewButtons.forEach(function (b) {
      b.setAttribute('aria-pressed', String(b.getAttribute('data-view') === state.view));
    });
    codeChip.replaceChildren();
    codeChip.hidden = state.code === null;
    if (state.code !== null) {
      codeChip.appendChild(h('span', null, ['Error ', h('code', { text: state.code })]));
      codeChip.appendChild(h('button', {
        type: 'button', class: 'chip-x', 'aria-label': 'Clear the error filter',
        onclick: function () { state.code = null; state.page = 0; render(); },
      }, ['\u00D7']));
    }
    var cards = state.view !== 'errors';
    byId('results-heading').textContent = state.view === 'review' ? 'Needs review' : cards ? 'Items' : 'Errors by code';
    grid.hidden = !cards;
    groups.hidden = cards;
    if (state.view === 'review') renderCards(reviewList(), 'review');
    else if (cards) renderCards(items.filter(function (it) { return matches(it, false); }), 'items');
    else renderGroups(items.filter(function (it) { return matches(it, true); }));
  }

  /** The flagged results among the filtered items, lowest score first (then by id, stable). */
  function reviewList() {
    return items.filter(function (it) { return flagged(it) && matches(it, false); })
      .sort(function (a, b) { return a.rv.score - b.rv.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0); });
  }
  byId('review-count').textContent = fmtCount(flaggedCount);
  // The header's Needs review tile opens the view too, when there is something to see.
  var reviewTile = document.querySelector('[data-stat="needs_review"]');
  if (reviewTile && flaggedCount > 0) {
    reviewTile.classList.add('tile-link');
    reviewTile.setAttribute('role', 'button');
    reviewTile.setAttribute('tabindex', '0');
    reviewTile.setAttribute('title', 'Show the results that need review');
    var openReview = function () { state.view = 'review'; state.page = 0; render(); focusResults(); };
    reviewTile.addEventListener('click', openReview);
    reviewTile.addEventListener('keydown', function (event) {
      if (event.key === 'Enter' || event.key === ' ') { event.preventDefault(); openReview(); }
    });
  }

  function focusResults() {
    var heading = byId('results-heading');
    heading.focus({ preventScroll: true });
    heading.scrollIntoView({ block: 'start' });
  }
  byId('prev').addEventListener('click', function () { state.page -= 1; render(); focusResults(); });
  byId('next').addEventListener('click', function () { state.page += 1; render(); focusResults(); });

  document.documentElement.classList.add('js');
  render();
})();
`;
