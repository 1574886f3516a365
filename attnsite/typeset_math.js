// TeX to MathJax's CommonHTML, for attnsite/typeset_math.py: the site's formulas are typeset when it is built, not in
// every reader's browser. Run by node with the folder that holds the npm packages (package.json's MathJax):
//   node attnsite/typeset_math.js NODE_MODULES FONT_URL SCALE
// One request per line on stdin, one answer per line on stdout, in order:
//   ["tex", true|false (display)]  ->  {"html": "<mjx-container ...>"}  or  {"error": "TeX's message"}
//   ["stylesheet"]                 ->  {"css": "..."}  (every character of MathJax's TeX fonts, from FONT_URL)
// A TeX error (an undefined command, unbalanced braces) is an answer, not a red formula on the page.
'use strict';
const path = require('path');
const readline = require('readline');

const [modules, fontURL, scale] = process.argv.slice(2);
if (!modules || !fontURL || !(Number(scale) > 0)) {
  process.stderr.write('usage: node typeset_math.js NODE_MODULES FONT_URL SCALE\n');
  process.exit(2);
}

require(path.join(modules, 'mathjax')).init({
  loader: {
    paths: {mathjax: path.join(modules, 'mathjax', 'es5')},
    load: ['input/tex-full', 'output/chtml', 'adaptors/liteDOM', 'a11y/assistive-mml'],
  },
  tex: {
    // every package but noundefined, which draws an unknown command in red instead of failing
    packages: {'[-]': ['noundefined']},
    formatError: (jax, error) => { throw error; },
  },
  // the stylesheet covers every character, so it is the same for every page and every build
  chtml: {fontURL: fontURL, adaptiveCSS: false},
  startup: {typeset: false},
}).then((MathJax) => {
  const adaptor = MathJax.startup.adaptor;
  // In a browser MathJax scales its font so that its ex-height (0.442 em) matches the text's: SCALE is the
  // scale it set for the theme's text in Chromium (attnsite/typeset_math.py), the same on every page.
  const options = {em: 16, ex: 8, containerWidth: 80 * 16, scale: Number(scale)};
  const answer = (value) => process.stdout.write(JSON.stringify(value) + '\n');
  const lines = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
  lines.on('line', (line) => {
    const request = JSON.parse(line);
    if (request[0] === 'stylesheet' && request.length === 1) {
      answer({css: adaptor.textContent(MathJax.chtmlStylesheet())});
      return;
    }
    try {
      const node = MathJax.tex2chtml(request[0], {...options, display: request[1]});
      answer({html: adaptor.outerHTML(node)});
    } catch (error) {
      answer({error: String(error.message || error)});
    }
  });
}).catch((error) => {
  process.stderr.write(`MathJax did not start: ${error.stack || error}\n`);
  process.exit(1);
});
