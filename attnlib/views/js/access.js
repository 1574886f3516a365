// Keyboard, names and fit for BertViz's head and model views, run once BertViz has drawn (attnlib.views).
// The head view's head toggles and the model view's thumbnails get a roving focus (Tab reaches the group,
// arrow keys move, Enter or Space toggles or enlarges, Escape closes an enlarged head), names and states
// for screen readers; the layer menu gets a label; the model view's SVG scales to its column.
// Also the page's access() for chapter 6's live views (attnsite/live_views.py).
function attnlibAccess(root, kind) {
  if (!root) { return; }
  var layer = root.querySelector('select#layer');
  if (layer && !layer.getAttribute('aria-label')) { layer.setAttribute('aria-label', 'Layer'); }
  function items() {
    if (kind === 'head') {
      var svg = root.querySelector('#vis svg');
      if (!svg) { return []; }
      var groups = Array.prototype.filter.call(svg.children, function (g) {
        return g.tagName === 'g' && !g.id && g.querySelector(':scope > rect') && !g.querySelector('text, line');
      });
      return groups.length ? Array.prototype.slice.call(groups[groups.length - 1].children) : [];
    }
    return Array.prototype.map.call(root.querySelectorAll('rect.attn_background'), function (bg) {
      var group = bg.parentNode, rects = group.querySelectorAll(':scope > rect');
      return rects[rects.length - 1];
    });
  }
  function describe(item, i, count) {
    if (kind === 'head') {
      var on = (item.getAttribute('fill') || '').charAt(0) === '#';
      item.setAttribute('role', 'switch');
      item.setAttribute('aria-checked', on ? 'true' : 'false');
      item.setAttribute('aria-label', 'head ' + i);
    } else {
      var bg = item.parentNode.querySelector('rect.attn_background');
      var parts = (bg.id || '').split('_');
      var open = bg.getAttribute('stroke-opacity') !== '0';
      item.setAttribute('role', 'button');
      item.setAttribute('aria-pressed', open ? 'true' : 'false');
      item.setAttribute('aria-label', 'layer ' + parts[2] + ', head ' + parts[3] + ': enlarge');
    }
  }
  function fit() {
    var svg = root.querySelector('#vis svg');
    if (kind !== 'model' || !svg || svg.getAttribute('viewBox')) { return; }
    var w = +svg.getAttribute('width'), h = +svg.getAttribute('height');
    if (!w || !h) { return; }
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    svg.setAttribute('width', '100%');
    svg.removeAttribute('height');
    svg.style.maxWidth = w + 'px';
    svg.style.height = 'auto';
  }
  function enhance() {
    fit();
    var list = items(), focused = -1;
    list.forEach(function (item, i) {
      describe(item, i, list.length);
      if (item.getAttribute('tabindex') === '0') { focused = i; }
      if (item.dataset.attnlibKeys) { return; }
      item.dataset.attnlibKeys = '1';
      item.setAttribute('focusable', 'true');
      item.addEventListener('keydown', function (event) { onKey(event, i); });
    });
    list.forEach(function (item, i) { item.setAttribute('tabindex', i === Math.max(focused, 0) ? '0' : '-1'); });
    var svg = root.querySelector('#vis svg');
    if (svg && list.length) {
      svg.setAttribute('role', 'group');
      svg.setAttribute('aria-label', kind === 'head'
        ? 'Heads: arrow keys move, Space or Enter turns a head on or off'
        : 'Layers and heads: arrow keys move, Space or Enter enlarges a head, Escape closes it');
    }
  }
  function onKey(event, i) {
    var list = items(), step = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1}[event.key];
    if (kind === 'model' && (event.key === 'ArrowDown' || event.key === 'ArrowUp')) {
      var perRow = root.querySelectorAll('rect.attn_background[id^="attn_background_0_"]').length || 1;
      step *= perRow;
    }
    if (step) {
      var next = Math.min(Math.max(i + step, 0), list.length - 1);
      list.forEach(function (item, j) { item.setAttribute('tabindex', j === next ? '0' : '-1'); });
      list[next].focus();
      event.preventDefault();
    } else if (event.key === 'Escape' && kind === 'model') {  // close the enlarged head, keep the focus here
      var open = list.filter(function (item) { return item.getAttribute('aria-pressed') === 'true'; });
      if (!open.length) { return; }
      open[0].dispatchEvent(new MouseEvent('click', {bubbles: true}));
      event.preventDefault();
      enhance();
      if (items()[i]) { items()[i].focus(); }
    } else if (event.key === 'Enter' || event.key === ' ') {
      list[i].dispatchEvent(new MouseEvent('click', {bubbles: true}));
      event.preventDefault();
      enhance();
      var again = items();
      if (again[i]) { again[i].focus(); }
    }
  }
  enhance();
  new MutationObserver(function (mutations) {
    if (mutations.some(function (m) { return m.type === 'childList' || m.attributeName === 'fill'
                                            || m.attributeName === 'stroke-opacity'; })) { enhance(); }
  }).observe(root.querySelector('#vis') || root, {childList: true, subtree: true, attributes: true,
                                                  attributeFilter: ['fill', 'stroke-opacity']});
}
