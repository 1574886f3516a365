// What a person would see wrong on the page as it is drawn now (injected by tests/site/test_accessibility.py,
// run in Chromium with classic scrollbars drawn, as on Windows and most Linux desktops):
//  - "needless scrollbar": a box draws a scrollbar although what it shows overflows it by at most 2 px
//    (scrollWidth also counts MathJax's invisible assistive MathML: a formula "overflows" by 3-18 px);
//  - "overflow": an element sticks out of its column (the article, else the window) with no ancestor
//    between it and the column that scrolls or clips it;
//  - "cut text": text shortened with an ellipsis;
//  - "small control": a button, input, select, slider handle or button-styled link under 24 x 24 CSS px
//    (WCAG 2.2's 2.5.8 minimum target size).
// MathJax's assistive MathML and visually hidden text (1 px, clipped) are left out: nobody sees them.
// Returns a list of {kind, selector, detail}.
//
// One walk over the elements (a chapter has ~20,000), cheap checks first: each element's computed style and
// bounding box, which the browser keeps after one layout; a subtree that is not displayed is skipped whole.
// The costly checks run only for the few suspects those make: a box that scrolls (its client and scroll
// sizes, and only when it scrolls by more than SLACK a walk over what it shows), a box that crosses its
// column's edge (its ancestors' overflow), and whether a suspect is visually hidden (its ancestors' styles,
// each read once).
(function () {
  'use strict';
  var SLACK = 2;  // px: rounding of fractional layouts
  var SKIPPED = {'mjx-assistive-mml': 1, script: 1, style: 1, template: 1};  // never drawn for a person
  var problems = [];
  var body = document.body;
  var scroller = document.scrollingElement || document.documentElement;

  function selector(el) {
    var parts = [];
    for (var e = el; e && e.nodeType === 1 && e !== body && parts.length < 4; e = e.parentElement) {
      var part = e.tagName.toLowerCase();
      if (e.id) { parts.unshift(part + '#' + e.id); break; }
      var classes = String(e.getAttribute('class') || '').trim().split(/\s+/).filter(Boolean).slice(0, 2);
      if (classes.length) { part += '.' + classes.join('.'); }
      var parent = e.parentElement;
      if (parent) {
        var same = Array.prototype.filter.call(parent.children, function (c) { return c.tagName === e.tagName; });
        if (same.length > 1) { part += ':nth-of-type(' + (same.indexOf(e) + 1) + ')'; }
      }
      parts.unshift(part);
    }
    return parts.join(' > ');
  }
  function report(kind, el, detail) { problems.push({kind: kind, selector: selector(el), detail: detail}); }

  var styles = new Map();
  function style(el) {
    var s = styles.get(el);
    if (!s) { s = getComputedStyle(el); styles.set(el, s); }
    return s;
  }
  function visuallyHidden(el, s) {
    var r = el.getBoundingClientRect();
    return (s.position === 'absolute' && r.width <= 1 && r.height <= 1) ||
           /rect\(0(px)?,? ?0(px)?,? ?0(px)?,? ?0(px)?\)/.test(s.clip) || s.clipPath === 'inset(50%)';
  }
  // ``el`` and its ancestors below ``top`` (default: the body) are drawn: none is display: none, visually
  // hidden, assistive MathML or a script; none of the ancestors is an <svg> (its shapes are one picture)
  var drawnCache = new Map();
  function drawn(el, top) {
    if (!top && drawnCache.has(el)) { return drawnCache.get(el); }
    var ok = true;
    for (var e = el; e && e !== (top || body) && e !== body; e = e.parentElement) {
      if (!top && e !== el && drawnCache.has(e)) { ok = drawnCache.get(e); break; }
      var tag = e.tagName.toLowerCase(), s = style(e);
      if (SKIPPED[tag] || s.display === 'none' || visuallyHidden(e, s) ||
          (e !== el && tag === 'svg')) { ok = false; break; }
    }
    if (!top) { drawnCache.set(el, ok); }
    return ok;
  }
  // what a person sees: drawn, and not visibility: hidden
  function seen(el) { return drawn(el) && style(el).visibility !== 'hidden'; }

  // How far what a person sees in ``box`` (its elements and text, not assistive MathML or visually hidden
  // text, which scrollWidth counts) reaches past its client area: [right, bottom] in px, at least 0. Only an
  // overflow of at most SLACK is of interest (a needless bar), so the walk stops once every direction in
  // ``wanted`` ([right, bottom]: true where a bar is drawn) has found more.
  function visibleOverflow(box, wanted) {
    var r = box.getBoundingClientRect();
    var right = r.left + box.clientLeft + box.clientWidth - box.scrollLeft;
    var bottom = r.top + box.clientTop + box.clientHeight - box.scrollTop;
    var far = [0, 0], range = document.createRange(), count = 0;
    function open() { return count < 20000 && ((wanted[0] && far[0] <= SLACK) || (wanted[1] && far[1] <= SLACK)); }
    function shows(node) {  // drawn from node up to box (node: an element, or a text node's parent)
      return node === box || drawn(node, box);
    }
    (function walk(el) {  // last child first: what overflows a scrolling box is mostly at its end
      for (var c = el.lastChild; c && open(); c = c.previousSibling) {
        count++;
        var rect = null, element = c.nodeType === 1;
        if (c.nodeType === 3) {
          if (!c.textContent.trim()) { continue; }
          range.selectNodeContents(c);
          rect = range.getBoundingClientRect();
        } else if (element) {
          var tag = c.tagName.toLowerCase();
          if (SKIPPED[tag]) { continue; }
          rect = c.getBoundingClientRect();
          if (tag !== 'svg') { walk(c); }
        } else { continue; }
        if (rect.width > 0 && rect.height > 0 && (rect.right - right > far[0] || rect.bottom - bottom > far[1]) &&
            (element ? shows(c) && style(c).visibility !== 'hidden' : shows(c.parentElement))) {
          far[0] = Math.max(far[0], rect.right - right);
          far[1] = Math.max(far[1], rect.bottom - bottom);
        }
      }
    })(box);
    return [Math.round(far[0]), Math.round(far[1])];
  }

  function scrollbars(el) {
    var s = style(el);
    if (s.overflowX === 'visible' && s.overflowY === 'visible') { return; }
    var borderX = parseFloat(s.borderLeftWidth) + parseFloat(s.borderRightWidth);
    var borderY = parseFloat(s.borderTopWidth) + parseFloat(s.borderBottomWidth);
    var barBelow = el.offsetHeight - el.clientHeight - borderY > 1;
    var barBeside = el.offsetWidth - el.clientWidth - borderX > 1;
    if (!(barBelow || barBeside) || !seen(el)) { return; }
    // what shows past the client area is at most what scrolls (the scroll size); only where that is more
    // than SLACK is what shows measured (it may be assistive MathML, which nobody sees)
    var extra = [el.scrollWidth - el.clientWidth, el.scrollHeight - el.clientHeight];
    var closer = [barBelow && extra[0] > SLACK, barBeside && extra[1] > SLACK];
    var walked = closer[0] || closer[1] ? visibleOverflow(el, closer) : extra;
    var over = [closer[0] ? walked[0] : extra[0], closer[1] ? walked[1] : extra[1]];
    if (barBelow && over[0] <= SLACK) {
      report('needless scrollbar', el, 'horizontal scrollbar; ' + (closer[0] ? 'what shows overflows by ' +
             over[0] + ' px (scrollWidth: ' : 'it scrolls by ') + extra[0] + ' px' + (closer[0] ? ')' : ''));
    }
    if (barBeside && over[1] <= SLACK) {
      report('needless scrollbar', el, 'vertical scrollbar; ' + (closer[1] ? 'what shows overflows by ' +
             over[1] + ' px (scrollHeight: ' : 'it scrolls by ') + extra[1] + ' px' + (closer[1] ? ')' : ''));
    }
  }

  var CONTROL_TAGS = {button: 1, select: 1, textarea: 1, input: 1};
  var CONTROL_ROLE = /^(button|slider|switch|checkbox|radio|tab|menuitem)$/;
  function isControl(el, tag) {
    if (CONTROL_TAGS[tag]) { return tag !== 'input' || el.type !== 'hidden'; }
    return el.classList.contains('noUi-handle') ||
      (tag === 'a' && /(^|\s)(btn|button)(\s|-|$)/.test(String(el.getAttribute('class') || ''))) ||
      CONTROL_ROLE.test(el.getAttribute('role') || '');
  }

  // one walk in document order (parents before children), skipping what is never drawn by its tag alone
  var column = document.querySelector('.bd-article');
  var columnBox = column ? column.getBoundingClientRect() : null;
  var windowWidth = document.documentElement.clientWidth;
  var outside = [];  // elements whose box crosses their column's edge (checked below)
  (function walk(el, inArticle) {  // inArticle: el is the column or inside it
    for (var c = el.firstElementChild; c; c = c.nextElementSibling) {
      var tag = c.tagName.toLowerCase();
      if (SKIPPED[tag]) { continue; }
      var s = style(c);
      if (s.display === 'none') { continue; }  // nor anything inside it
      var html = !(c instanceof SVGElement);
      if (html && c !== scroller) {
        if (s.overflowX !== 'visible' || s.overflowY !== 'visible') { scrollbars(c); }
        // cut text: an ellipsis is drawn where the text is wider than its box
        if (s.textOverflow === 'ellipsis' && s.overflowX !== 'visible' && c.scrollWidth > c.clientWidth + 1 &&
            c.textContent.trim() && seen(c)) {
          report('cut text', c, '"' + c.textContent.trim().slice(0, 40) + '" ends in an ellipsis');
        }
      }
      var box = c.getBoundingClientRect();
      if (box.width > 0 && box.height > 0) {
        if (html && isControl(c, tag) && (box.width < 24 - 0.5 || box.height < 24 - 0.5) && seen(c)) {
          report('small control', c, Math.round(box.width * 10) / 10 + ' x ' + Math.round(box.height * 10) / 10 +
                 ' px (at least 24 x 24)');
        }
        var left = inArticle ? columnBox.left : 0, right = inArticle ? columnBox.right : windowWidth;
        if (box.right > right + 1 || box.left < left - 1) { outside.push([c, box, inArticle, left, right]); }
      }
      if (tag !== 'svg') { walk(c, inArticle || c === column); }
    }
  })(body, false);

  // overflow: sticking out of the column (inside the article) or out of the window (elsewhere), with no
  // ancestor up to the column that scrolls or clips it; only the outermost such element is reported
  var reported = [];
  outside.forEach(function (item) {
    var el = item[0], box = item[1];
    if (!seen(el)) { return; }
    for (var p = el.parentElement; p && p !== column && p !== body; p = p.parentElement) {
      if (style(p).overflowX !== 'visible') { return; }
    }
    for (var i = 0; i < reported.length; i++) { if (reported[i].contains(el)) { return; } }
    reported.push(el);
    report('overflow', el, 'spans ' + Math.round(box.left) + '..' + Math.round(box.right) + ' px, its ' +
           (item[2] ? 'column' : 'window') + ' ' + Math.round(item[3]) + '..' + Math.round(item[4]) + ' px');
  });
  return problems;
})();
