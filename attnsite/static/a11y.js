// Accessibility of what the site's libraries draw at run time (attnsite/a11y.py explains the whole).
// ipywidgets sliders: a name (their visible label) and a spoken value (their readout, e.g. "1.0", where
// noUiSlider says the option's index, "3"); dropdowns: a <label for>; each explorer (attnlib.views.widgets,
// class attnlib-explorer): a group named by its title and a live region that says which state is shown.
(function () {
  'use strict';
  var OWN = {'aria-label': 1, 'aria-valuetext': 1, 'aria-labelledby': 1, 'role': 1, 'aria-live': 1, 'id': 1,
             'for': 1, 'aria-describedby': 1, 'tabindex': 1, 'contenteditable': 1, 'aria-hidden': 1};
  var HIDDEN = 'position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;' +
               'clip:rect(0,0,0,0);white-space:nowrap;border:0';
  var count = 0;

  function text(el) { return el ? el.textContent.replace(/\s+/g, ' ').trim() : ''; }
  function set(el, name, value) { if (el && el.getAttribute(name) !== value) { el.setAttribute(name, value); } }
  function uid(el, prefix) {
    if (!el.id) { el.id = prefix + '-' + (++count); }
    return el.id;
  }

  function fixSlider(slider) {
    var label = slider.querySelector(':scope > .widget-label');
    var readout = slider.querySelector('.widget-readout');
    var handle = slider.querySelector('.noUi-handle');
    if (!handle) { return; }
    if (text(label)) {
      set(handle, 'aria-labelledby', uid(label, 'attnlib-label'));
      handle.removeAttribute('aria-label');
    }
    if (readout && text(readout)) { set(handle, 'aria-valuetext', text(readout)); }
    // The readout is editable in ipywidgets, but a static page has no kernel to take a typed value: it would
    // show "abc" beside a figure that stays put. Shown text only; the handle already speaks the value.
    if (readout && readout.getAttribute('contenteditable') !== 'false') {
      readout.setAttribute('contenteditable', 'false');
      readout.removeAttribute('tabindex');
      readout.setAttribute('aria-hidden', 'true');
    }
  }

  function fixDropdown(dropdown) {
    var label = dropdown.querySelector(':scope > .widget-label');
    var select = dropdown.querySelector('select');
    if (!select || !text(label)) { return; }
    if (label.tagName === 'LABEL') { set(label, 'for', uid(select, 'attnlib-select')); }
    else { set(select, 'aria-labelledby', uid(label, 'attnlib-label')); }
  }

  function visibleState(explorer) {
    var states = explorer.querySelectorAll('.attnlib-state');
    for (var i = 0; i < states.length; i++) {
      if (states[i].offsetParent !== null) { return states[i]; }
    }
    return null;
  }

  function fixExplorer(explorer) {
    var title = explorer.querySelector(':scope > .widget-html b');
    set(explorer, 'role', 'group');
    if (text(title)) { set(explorer, 'aria-label', text(title)); }
    var region = explorer.querySelector(':scope > .attnlib-live');
    if (!region) {
      region = document.createElement('div');
      region.className = 'attnlib-live';
      region.setAttribute('role', 'status');
      region.setAttribute('aria-live', 'polite');
      region.setAttribute('style', HIDDEN);
      explorer.appendChild(region);
    }
    var state = visibleState(explorer);
    if (!state) { return; }
    var image = state.querySelector('img[alt], svg[role="img"][aria-label]');
    var message = 'Showing ' + (state.getAttribute('data-settings') || '') + '.' +
                  (image ? ' ' + (image.getAttribute('alt') || image.getAttribute('aria-label')) : '');
    if (region.dataset.shown !== message) {
      region.dataset.shown = message;
      region.textContent = region.dataset.ready ? message : '';  // announce changes, not the first state
      region.dataset.ready = '1';
    }
  }

  function fixModeButton() {
    var mode = document.documentElement.dataset.mode || 'auto';
    var words = {light: 'light', dark: 'dark', auto: 'system setting'};
    document.querySelectorAll('.theme-switch-button').forEach(function (button) {
      set(button, 'aria-label', 'Color mode: ' + (words[mode] || mode));
    });
  }

  function fixTheme() {
    fixModeButton();
    // the theme's collapsed-section toggles are <input type=checkbox> without a name in some versions
    document.querySelectorAll('input.toctree-checkbox:not([aria-label])').forEach(function (box) {
      var item = box.closest('li');
      var link = item && item.querySelector(':scope > a');
      box.setAttribute('aria-label', 'Show sections of ' + text(link));
    });
  }

  // A box that scrolls sideways (a wide table or explorer view on a phone) must be reachable by keyboard,
  // and named by what it holds: a table's caption, a figure's description, a code's first line, the section.
  var FOCUSABLE = 'a[href], button, input, select, textarea, [tabindex]';
  function clip(words, n) { return words.length > n ? words.slice(0, n - 1) + '…' : words; }
  function sectionOf(box) {
    var section = box.closest('section');
    var heading = section && section.querySelector(':scope > h1, :scope > h2, :scope > h3, :scope > h4');
    return heading ? text(heading).replace(/#$/, '').trim() : '';
  }
  function scrollName(box) {
    var caption = box.querySelector('caption');
    if (text(caption)) { return 'Table: ' + clip(text(caption), 80); }
    var figure = box.querySelector('img[alt], svg[role="img"][aria-label]');
    var alt = figure && (figure.getAttribute('alt') || figure.getAttribute('aria-label'));
    if (alt) { return 'Figure: ' + clip(alt, 80); }
    var code = box.querySelector('pre');
    if (code && text(code)) { return 'Code: ' + clip(code.textContent.trim().split('\n')[0], 60); }
    if (box.querySelector('mjx-container, .MathJax') || /math/.test(box.className)) {
      return 'Equation' + (sectionOf(box) ? ' in ' + sectionOf(box) : '');
    }
    return 'Wide content' + (sectionOf(box) ? ' in ' + sectionOf(box) : '');
  }
  // Inline math does not scroll (a11y.css), unless it is wider than its box: then it is marked and scrolls.
  // Its width is the formula's (MathJax's container), not scrollWidth: that also counts the assistive MathML,
  // which is clipped to nothing but makes every formula "overflow" by a few pixels.
  function formulaWidth(span) {
    var width = 0;
    for (var c = span.firstElementChild; c; c = c.nextElementSibling) {
      if (c.tagName !== 'SCRIPT' && c.tagName !== 'MJX-ASSISTIVE-MML') { width += c.offsetWidth; }
    }
    return width;
  }
  function markWideMath() {
    document.querySelectorAll('.bd-article span.math').forEach(function (span) {
      var wide = formulaWidth(span) > span.clientWidth + 4;
      if (wide !== span.classList.contains('attnlib-wide-math')) { span.classList.toggle('attnlib-wide-math', wide); }
    });
  }
  // A code block whose text fits but that "overflows" anyway, by a rounding pixel or two or by its own right
  // padding (scrollWidth counts it after the longest line), would draw a scrollbar for nothing.
  var range = document.createRange();
  function textOverflow(pre) {
    range.selectNodeContents(pre);
    var text = range.getBoundingClientRect(), box = pre.getBoundingClientRect();
    return text.right + pre.scrollLeft - (box.left + pre.clientLeft + pre.clientWidth);
  }
  function fitsAnyway(pre) {
    var overflow = pre.scrollWidth - pre.clientWidth;
    if (overflow <= 0) { return false; }
    // the text sticks out by at least the overflow less the padding (whether a browser counts it or not): a
    // block past that by more than 2 px needs no measure of its text (a range over a long block costs ~2 ms)
    if (overflow - parseFloat(getComputedStyle(pre).paddingRight) > 2) { return false; }
    return textOverflow(pre) <= 2;
  }
  function unscrollRounding() {
    document.querySelectorAll('.bd-article pre').forEach(function (pre) {
      var fits = fitsAnyway(pre);
      if (fits !== pre.classList.contains('attnlib-fits')) { pre.classList.toggle('attnlib-fits', fits); }
    });
  }
  function fixScrollers() {
    document.querySelectorAll(SCROLL_BOXES).forEach(function (box) {
      if (box.scrollWidth <= box.clientWidth + 1 || hiddenWidth(box) <= 1 || box.closest('svg')) { return; }
      var overflow = getComputedStyle(box).overflowX;
      if ((overflow === 'auto' || overflow === 'scroll') && !box.querySelector(FOCUSABLE) && !box.hasAttribute('tabindex')) {
        box.setAttribute('tabindex', '0');
        if (!box.getAttribute('role')) { box.setAttribute('role', 'region'); }
        if (!box.getAttribute('aria-label') && !box.getAttribute('aria-labelledby')) {
          box.setAttribute('aria-label', scrollName(box) + ' (scrolls sideways)');
        }
      }
    });
  }

  // A box that scrolls sideways gets a visible cue (a11y.css): attnlib-scrolls on the box (its hidden edge
  // shaded), attnlib-scroll-parent on its parent (a line under it). A display formula's overflow is its
  // rendering's width past the box (scrollWidth also counts the clipped assistive MathML).
  var SCROLL_BOXES = '.bd-article div, .bd-article table, .bd-article mjx-container[display="true"], ' +
                     '.bd-article span.attnlib-wide-math';
  function hiddenWidth(box) {
    if (box.tagName === 'MJX-CONTAINER') {
      var math = box.querySelector(':scope > mjx-math');
      return math ? math.getBoundingClientRect().width - box.clientWidth : 0;
    }
    return box.scrollWidth - box.clientWidth;
  }
  function setClass(el, name, on) { if (el && on !== el.classList.contains(name)) { el.classList.toggle(name, on); } }
  function markScrolling() {
    var marked = new Set(document.querySelectorAll('.bd-article .attnlib-scrolls'));
    document.querySelectorAll(SCROLL_BOXES).forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 2 && !box.closest('svg')) { marked.add(box); }
    });
    marked.forEach(function (box) {
      var overflow = getComputedStyle(box).overflowX;
      var scrolls = (overflow === 'auto' || overflow === 'scroll') && hiddenWidth(box) > 2;
      setClass(box, 'attnlib-scrolls', scrolls);
      if (box.tagName !== 'SPAN') { setClass(box.parentElement, 'attnlib-scroll-parent', scrolls); }
    });
  }
  // A figure shown narrower than it was drawn links to its full-size file: say so. Its drawn CSS width: Sphinx
  // writes a notebook image's as style="width: ...px", an explorer state's <img> has a width attribute.
  function drawnWidth(img) { return parseFloat(img.style.width) || Number(img.getAttribute('width')) || 0; }
  function markShrunk() {
    document.querySelectorAll('.bd-article a.image-reference > img, .bd-article a > img[width]').forEach(
      function (img) {
        var shown = img.getBoundingClientRect().width;
        setClass(img.parentElement, 'attnlib-shrunk', shown > 0 && shown < 0.9 * drawnWidth(img));
      });
  }

  function fixAll() {
    unscrollRounding();
    markWideMath();
    fixScrollers();
    markScrolling();
    markShrunk();
    document.querySelectorAll('.widget-slider').forEach(fixSlider);
    document.querySelectorAll('.widget-dropdown').forEach(fixDropdown);
    document.querySelectorAll('.attnlib-explorer').forEach(fixExplorer);
    fixTheme();
  }

  var scheduled = false;
  function schedule() {
    if (scheduled) { return; }
    scheduled = true;
    setTimeout(function () { scheduled = false; fixAll(); }, 0);
  }

  function start() {
    fixAll();
    new MutationObserver(function (mutations) {
      for (var i = 0; i < mutations.length; i++) {
        var m = mutations[i];
        if (m.type !== 'attributes' || !OWN[m.attributeName]) { schedule(); return; }
      }
    }).observe(document.body, {childList: true, subtree: true, characterData: true, attributes: true});
    window.addEventListener('resize', schedule);
    new MutationObserver(fixModeButton).observe(document.documentElement,
                                               {attributes: true, attributeFilter: ['data-mode']});
  }

  window.attnlibA11y = {fixAll: fixAll};
  if (document.readyState === 'loading') { document.addEventListener('DOMContentLoaded', start); }
  else { start(); }
})();
