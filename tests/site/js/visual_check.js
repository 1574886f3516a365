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
(function () {
  'use strict';
  var SLACK = 2;  // px: rounding of fractional layouts
  var problems = [];

  function selector(el) {
    var parts = [];
    for (var e = el; e && e.nodeType === 1 && e !== document.body && parts.length < 4; e = e.parentElement) {
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

  function visuallyHidden(el, style) {
    var r = el.getBoundingClientRect();
    return (style.position === 'absolute' && r.width <= 1 && r.height <= 1) ||
           /rect\(0(px)?,? ?0(px)?,? ?0(px)?,? ?0(px)?\)/.test(style.clip) || style.clipPath === 'inset(50%)';
  }
  // the elements a person sees: not hidden, not assistive MathML, not inside visually hidden ones
  var shown = [];
  (function walk(el) {
    for (var c = el.firstElementChild; c; c = c.nextElementSibling) {
      var tag = c.tagName.toLowerCase();
      if (tag === 'mjx-assistive-mml' || tag === 'script' || tag === 'style' || tag === 'template') { continue; }
      var style = getComputedStyle(c);
      if (style.display === 'none' || visuallyHidden(c, style)) { continue; }
      if (style.visibility !== 'hidden') { shown.push([c, style]); }
      if (tag !== 'svg') { walk(c); }
    }
  })(document.body);

  // How far what a person sees in ``box`` (its elements and text, not assistive MathML or visually hidden
  // text, which scrollWidth counts) reaches past its client area: [right, bottom] in px, at least 0.
  function visibleOverflow(box) {
    var r = box.getBoundingClientRect();
    var right = r.left + box.clientLeft + box.clientWidth - box.scrollLeft;
    var bottom = r.top + box.clientTop + box.clientHeight - box.scrollTop;
    var far = [0, 0], range = document.createRange(), seen = 0;
    (function walk(el) {
      for (var c = el.firstChild; c && seen < 20000; c = c.nextSibling) {
        seen++;
        var rect = null;
        if (c.nodeType === 3) {
          if (!c.textContent.trim()) { continue; }
          range.selectNodeContents(c);
          rect = range.getBoundingClientRect();
        } else if (c.nodeType === 1) {
          var tag = c.tagName.toLowerCase();
          if (tag === 'mjx-assistive-mml' || tag === 'script' || tag === 'style') { continue; }
          var style = getComputedStyle(c);
          if (style.display === 'none' || visuallyHidden(c, style)) { continue; }
          if (style.visibility !== 'hidden') { rect = c.getBoundingClientRect(); }
          if (tag !== 'svg') { walk(c); }
        }
        if (rect && rect.width > 0 && rect.height > 0) {
          far[0] = Math.max(far[0], rect.right - right);
          far[1] = Math.max(far[1], rect.bottom - bottom);
        }
      }
    })(box);
    return [Math.round(far[0]), Math.round(far[1])];
  }

  var scroller = document.scrollingElement || document.documentElement;
  var column = document.querySelector('.bd-article');
  var columnBox = column ? column.getBoundingClientRect() : null;
  var windowWidth = document.documentElement.clientWidth;
  var clipsX = function (style) { return style.overflowX !== 'visible'; };

  shown.forEach(function (pair) {
    var el = pair[0], style = pair[1];
    if (el === scroller || el === document.body) { return; }
    var borderX = parseFloat(style.borderLeftWidth) + parseFloat(style.borderRightWidth);
    var borderY = parseFloat(style.borderTopWidth) + parseFloat(style.borderBottomWidth);

    // a scrollbar drawn: the box is thicker than its client area plus its borders
    if (style.overflowX !== 'visible' || style.overflowY !== 'visible') {
      var barBelow = el.offsetHeight - el.clientHeight - borderY > 1;
      var barBeside = el.offsetWidth - el.clientWidth - borderX > 1;
      if (barBelow || barBeside) {
        var over = visibleOverflow(el);
        if (barBelow && over[0] <= SLACK) {
          report('needless scrollbar', el, 'horizontal scrollbar; what shows overflows by ' + over[0] +
                 ' px (scrollWidth: ' + (el.scrollWidth - el.clientWidth) + ' px)');
        }
        if (barBeside && over[1] <= SLACK) {
          report('needless scrollbar', el, 'vertical scrollbar; what shows overflows by ' + over[1] +
                 ' px (scrollHeight: ' + (el.scrollHeight - el.clientHeight) + ' px)');
        }
      }
    }

    // cut text: an ellipsis drawn
    if (style.textOverflow === 'ellipsis' && clipsX(style) && el.scrollWidth > el.clientWidth + 1 &&
        el.textContent.trim()) {
      report('cut text', el, '"' + el.textContent.trim().slice(0, 40) + '" ends in an ellipsis');
    }

    // small controls
    var tag = el.tagName.toLowerCase();
    var control = (tag === 'button' || tag === 'select' || tag === 'textarea' ||
                   (tag === 'input' && el.type !== 'hidden') || el.classList.contains('noUi-handle') ||
                   (tag === 'a' && /(^|\s)(btn|button)(\s|-|$)/.test(String(el.getAttribute('class') || ''))) ||
                   /^(button|slider|switch|checkbox|radio|tab|menuitem)$/.test(el.getAttribute('role') || ''));
    if (control && !(el instanceof SVGElement)) {
      var box = el.getBoundingClientRect();
      if (box.width > 0 && box.height > 0 && (box.width < 24 - 0.5 || box.height < 24 - 0.5)) {
        report('small control', el, Math.round(box.width * 10) / 10 + ' x ' + Math.round(box.height * 10) / 10 +
               ' px (at least 24 x 24)');
      }
    }
  });

  // overflow: sticking out of the column (inside the article) or out of the window (elsewhere), with no
  // ancestor up to the column that scrolls or clips it; only the outermost such element is reported
  var reported = [];
  shown.forEach(function (pair) {
    var el = pair[0];
    var box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) { return; }
    var inArticle = column && column.contains(el) && el !== column;
    var left = inArticle ? columnBox.left : 0, right = inArticle ? columnBox.right : windowWidth;
    if (box.right <= right + 1 && box.left >= left - 1) { return; }
    for (var p = el.parentElement; p && p !== column && p !== document.body; p = p.parentElement) {
      if (clipsX(getComputedStyle(p))) { return; }
    }
    for (var i = 0; i < reported.length; i++) { if (reported[i].contains(el)) { return; } }
    reported.push(el);
    report('overflow', el, 'spans ' + Math.round(box.left) + '..' + Math.round(box.right) + ' px, its ' +
           (inArticle ? 'column' : 'window') + ' ' + Math.round(left) + '..' + Math.round(right) + ' px');
  });
  return problems;
})();
