// The search page (attnsite/theme.py adds it there, after Sphinx's searchtools.js):
//  - snippets are read from each page's text; leave out what a reader never reads as prose there: the printed
//    contents list (sphinx-book-theme's #jb-print-docs-body), and the TeX delimiters and commands of the math
//    (MathJax has not typeset the fetched page: "\(d_k\)" becomes "d_k", "\operatorname{Attention}" "Attention");
//  - a page whose own title holds a searched word ranks above pages that only mention it (Sphinx scores a word
//    in any section title the same as one in the page's title).
(function () {
  'use strict';
  if (typeof Search === 'undefined' || typeof Scorer === 'undefined') { return; }
  var TEX_COMMAND = /\\(operatorname|mathrm|text|mathbf|boldsymbol|mathcal|mathbb)\s*\{([^{}]*)\}/g;

  function plainMath(text) {
    return text.replace(/\\[()[\]]/g, '')
      .replace(TEX_COMMAND, '$2')
      .replace(/\\(left|right|big|Big|,|;|!|quad|qquad)/g, ' ')
      .replace(/\\([A-Za-z]+)/g, '$1')
      .replace(/[{}]/g, '')
      .replace(/\s+/g, ' ');
  }

  var original = Search.htmlToText;
  Search.htmlToText = function (htmlString, anchor) {
    var page = new DOMParser().parseFromString(htmlString, 'text/html');
    page.querySelectorAll('#jb-print-docs-body, .onlyprint, .toctree-wrapper').forEach(function (e) { e.remove(); });
    return plainMath(original(page.documentElement.outerHTML, anchor));
  };

  var words = (new URLSearchParams(window.location.search).get('q') || '').toLowerCase().split(/\s+/)
    .filter(function (w) { return w.length > 1; });
  Scorer.score = function (result) {
    var title = String(result[1] || '').toLowerCase(), anchor = result[2];
    var own = !anchor && title.indexOf(' > ') < 0 && words.some(function (w) { return title.indexOf(w) >= 0; });
    return result[4] + (own ? 20 : 0);
  };
})();
