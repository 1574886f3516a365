// The search page (attnsite/theme.py adds it there):
//  - snippets are read from each page's text; leave out what a reader never reads as prose there: the printed
//    contents list (sphinx-book-theme's #jb-print-docs-body) and the launch and download buttons, and read the math
//    as a reader would say it, from each formula's TeX (its data-tex, attnsite/typeset_math.py): "d_k" stays
//    "d_k", "\operatorname{Attention}" becomes "Attention", "\sqrt{d_k}" "√d_k";
//  - a page whose own title holds a searched word ranks above pages that only mention it (Sphinx scores a word
//    in any section title the same as one in the page's title).
// It runs after searchtools.js, which defines Search, and before searchindex.js, whose arrival runs the query
// (all three are deferred, so they run in the order written: attnsite/a11y.py writes this one between them).
(function () {
  'use strict';
  if (typeof Search === 'undefined' || typeof Scorer === 'undefined') { return; }
  var TEX_COMMAND = /\\(operatorname|mathrm|text|mathbf|boldsymbol|mathcal|mathbb)\s*\{([^{}]*)\}/g;
  var SYMBOLS = {sqrt: '√', top: 'ᵀ', times: '×', cdot: '·', le: '≤', leq: '≤', ge: '≥', geq: '≥', ne: '≠', neq: '≠',
    infty: '∞', sum: 'Σ', approx: '≈', to: '→', in: '∈', ldots: '…', dots: '…', cdots: '⋯', iff: '⟺', mid: '|',
    alpha: 'α', beta: 'β', gamma: 'γ', delta: 'δ', epsilon: 'ε', theta: 'θ', lambda: 'λ', mu: 'μ', pi: 'π',
    sigma: 'σ', tau: 'τ', phi: 'φ', Delta: 'Δ', Sigma: 'Σ', propto: '∝', log: 'log', exp: 'exp', max: 'max'};
  // what a reader never reads as prose on the page: the printed contents list, the launch and download buttons
  var LEFT_OUT = '#jb-print-docs-body, .onlyprint, .toctree-wrapper, .bd-header-article, .headerlink';

  // TeX source as a reader would say it: "\operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right)" reads
  // "softmax(Q Kᵀ/√d_k)"; environments, alignment marks and line breaks go
  function plainMath(tex) {
    return tex.replace(/\\[()[\]]/g, ' ').replace(/\^\s*(\{\s*\\top\s*\}|\\top)/g, 'ᵀ')
      .replace(/\\(begin|end)\s*\{[^{}]*\}/g, ' ')
      .replace(TEX_COMMAND, '$2')
      .replace(/\\sqrt\s*\{([^{}]*)\}/g, '√$1')
      .replace(/\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, '$1/$2')
      .replace(/\\\\|&/g, ' ')
      .replace(/\\(left|right|big|Big|bigl|bigr|Bigl|Bigr|,|;|!|:|quad|qquad)/g, ' ')
      .replace(/\\([A-Za-z]+)/g, function (match, name) { return SYMBOLS[name] || name; })
      .replace(/[{}]/g, '')
      .replace(/\s+/g, ' ');
  }

  var original = Search.htmlToText;
  Search.htmlToText = function (htmlString, anchor) {
    var page = new DOMParser().parseFromString(htmlString, 'text/html');
    page.querySelectorAll(LEFT_OUT).forEach(function (e) { e.remove(); });
    page.querySelectorAll('.math').forEach(function (e) {
      e.textContent = ' ' + plainMath(e.getAttribute('data-tex') || e.textContent) + ' ';
    });
    return original(page.documentElement.outerHTML, anchor).replace(/\s+/g, ' ');
  };

  var words = (new URLSearchParams(window.location.search).get('q') || '').toLowerCase().split(/\s+/)
    .filter(function (w) { return w.length > 1; });
  Scorer.score = function (result) {
    var title = String(result[1] || '').toLowerCase(), anchor = result[2];
    var own = !anchor && title.indexOf(' > ') < 0 && words.some(function (w) { return title.indexOf(w) >= 0; });
    return result[4] + (own ? 20 : 0);
  };
})();
