// What a reader meets in the page's formulas, figures and navigation, measured on the page as it is drawn now
// (injected by tests/site/test_accessibility.py on the load its axe-core run makes; no load of its own).
// Returns {equations, figures, navigation}:
//  - equations: every display formula of the article: its id and number, how many px of it are hidden past
//    the box that clips it (at the scroll position a reader first sees), whether that box scrolls and shows a
//    visible cue that it does (a11y.js: attnlib-scrolls, and the line under it), and how many px of the
//    formula its number covers;
//  - figures: every figure image and inline SVG chart shown in the article: its smallest text as displayed, in
//    CSS px (the figure's own smallest text, data-attnlib-text-px for a PNG or the font sizes of an SVG's text,
//    times the scale the page shows it at), where it is (section, alt text) and whether it offers a larger view;
//  - navigation: the visible sidebar toggles and search fields of the page's header (on every page, the search
//    page and the index included).
(function () {
  'use strict';
  function shown(el) {
    var r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) { return false; }
    for (var e = el; e && e !== document.body; e = e.parentElement) {
      var s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden') { return false; }
    }
    return true;
  }
  var toggles = {};
  ['primary-toggle', 'secondary-toggle', 'search-button-field'].forEach(function (name) {
    var all = Array.prototype.slice.call(document.querySelectorAll('.' + name));
    toggles[name] = {count: all.length, shown: all.filter(shown).length};
  });

  var article = document.querySelector('.bd-article');
  if (!article) { return {equations: [], figures: [], navigation: toggles, unmeasured: []}; }
  var columnRect = article.getBoundingClientRect();
  function section(el) {
    var s = el.closest('section');
    var h = s && s.querySelector(':scope > h1, :scope > h2, :scope > h3');
    return h ? h.textContent.replace(/#$/, '').replace(/\s+/g, ' ').trim() : '';
  }
  // the right edge of what a reader sees of ``el``: the nearest ancestor (up to the article) that clips it
  function clipOf(el) {
    for (var p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      var s = getComputedStyle(p);
      if (s.overflowX !== 'visible') {
        var r = p.getBoundingClientRect();
        return {box: p, right: r.left + p.clientLeft + p.clientWidth, scrolls: /(auto|scroll)/.test(s.overflowX)};
      }
      if (p === article) { break; }
    }
    return {box: article, right: columnRect.right, scrolls: false};
  }
  function cued(box) {
    if (!box.classList.contains('attnlib-scrolls') || !box.parentElement) { return false; }
    var after = getComputedStyle(box.parentElement, '::after');
    return after.content !== 'none' && after.display !== 'none';
  }

  var equations = Array.prototype.map.call(article.querySelectorAll('div.math'), function (div) {
    var math = div.querySelector('mjx-container[display="true"] > mjx-math');
    var number = div.querySelector('span.eqno');
    if (!math || !shown(div)) { return null; }
    var formula = math.getBoundingClientRect();
    var clip = clipOf(math);
    var visibleRight = Math.min(formula.right, clip.right, columnRect.right + 1);
    var overlap = 0, numberLeft = false;
    if (number && shown(number)) {
      var n = number.getBoundingClientRect();
      numberLeft = n.right <= formula.left + 1;  // the number belongs at the formula's right (or under its end)
      var vertical = Math.min(n.bottom, formula.bottom) - Math.max(n.top, formula.top);
      if (vertical > 2) { overlap = Math.max(0, Math.min(n.right, visibleRight) - Math.max(n.left, formula.left)); }
    }
    return {
      id: div.id || '', number: number ? number.textContent.trim() : '', section: section(div),
      width: Math.round(formula.width), hidden: Math.round(Math.max(0, formula.right - visibleRight)),
      scrolls: clip.scrolls, cue: clip.scrolls && cued(clip.box), overlap: Math.round(overlap), numberLeft: numberLeft,
    };
  }).filter(Boolean);

  function svgTextPx(svg) {
    var smallest = Infinity;
    svg.querySelectorAll('text').forEach(function (t) {
      if (!t.textContent.trim()) { return; }
      var size = parseFloat(getComputedStyle(t).fontSize), ctm = t.getScreenCTM();
      if (size && ctm) { smallest = Math.min(smallest, size * Math.sqrt(Math.abs(ctm.a * ctm.d - ctm.b * ctm.c))); }
    });
    return smallest;
  }
  // the CSS width a figure was drawn for: Sphinx writes a notebook image's as style="width: ...px" (a 2x PNG's
  // natural width is twice it), an explorer state's <img> has a width attribute
  function drawnWidth(img, fallback) {
    return parseFloat(img.style.width) || Number(img.getAttribute('width')) || fallback;
  }
  var figures = [];
  article.querySelectorAll('img[data-attnlib-text-px], svg[role="img"]').forEach(function (figure) {
    if (!shown(figure)) { return; }
    var r = figure.getBoundingClientRect(), own, px;
    if (figure.tagName.toLowerCase() === 'img') {
      own = parseFloat(figure.getAttribute('data-attnlib-text-px'));
      px = own * r.width / drawnWidth(figure, r.width);
    } else {
      px = svgTextPx(figure);
      if (!isFinite(px)) { return; }
      own = null;
    }
    var link = figure.closest('a');
    figures.push({section: section(figure), alt: (figure.getAttribute('alt') || figure.getAttribute('aria-label') ||
                  '').slice(0, 90), ownPx: own, shownPx: Math.round(px * 10) / 10, width: Math.round(r.width),
                  enlarges: !!(link && link.classList.contains('attnlib-shrunk')),
                  explorer: !!figure.closest('.attnlib-explorer')});
  });

  // figure PNGs that do not say their text size: they cannot be measured (executed before attnlib wrote it)
  var unmeasured = Array.prototype.filter.call(article.querySelectorAll('.cell_output img'), function (img) {
    return /\.png($|\?)|^data:image\/png/.test(img.getAttribute('src') || '') &&
      !img.hasAttribute('data-attnlib-text-px') && shown(img);
  }).map(function (img) { return (img.getAttribute('alt') || img.getAttribute('src')).slice(0, 80); });
  return {equations: equations, figures: figures, navigation: toggles, unmeasured: unmeasured};
})();
