"""Sphinx extension: the site's formulas are typeset when it is built, not in each reader's browser.

Sphinx's MathJax renderer writes TeX into the page (``\\(d_k\\)``) and every reader's browser downloads MathJax
(1.1 MB of JavaScript) and typesets each formula of the page before it settles: on a laptop about 2 CPU-s per
chapter, more on a phone. This renderer (``html_math_renderer = "attnlib"``, ``_config.yml``) typesets each
formula with the same MathJax (npm, ``package.json``) in node while Sphinx writes the page
(``typeset_math.js``), so the page holds MathJax's CommonHTML output, the same elements the browser made: the
formula drawn in MathJax's TeX fonts, and its MathML for screen readers (MathJax's assistive MathML). Pages load
no MathJax; one stylesheet, ``_static/attnlib/mathjax-chtml.css`` (every character of the fonts, 25 kB gzip,
cached across pages), draws every formula of the site from the fonts in ``_static/_vendor/mathjax/``.

A TeX error (an unknown command, an unbalanced brace) is a warning at the formula's source line, which
``jupyter-book build -W`` (``make book``) turns into a failed build: no reader meets a red formula.

The equations' numbers, labels and permalinks are Sphinx's (``attnsite.theme`` numbers them per chapter), as
with its MathJax renderer (``sphinx.ext.mathjax``), whose markup this keeps; each formula's element also keeps its
TeX (``data-tex``), from which the search page's snippets read it (``static/search.js``).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

from . import site_assets as assets

logger = logging.getLogger(__name__)

RENDERER = "attnlib"  # html_math_renderer in _config.yml
SCRIPT = Path(__file__).with_name("typeset_math.js")
STYLESHEET = f"{assets.STATIC_DIR}/mathjax-chtml.css"  # under _static/
# the fonts, in the built site (attnsite/site_assets.py copies them) and as the stylesheet's URL relative to itself
FONTS = f"{assets.VENDOR_DIR}/mathjax/output/chtml/fonts/woff-v2"
FONT_URL = os.path.relpath(FONTS, Path("_static") / assets.STATIC_DIR)
# In a browser MathJax scales its TeX font (ex-height 0.442 em) to the height of the text around it: 127.3 % for
# the body text of the theme in Chromium, what MathJax set there on nearly every formula of the site when it ran
# in the browser (126-129 % in headings, 113-128 % in the sidebar).
SCALE = 1.273
CLASSES = "math notranslate nohighlight"  # sphinx.ext.mathjax's, which the site's CSS and scripts select
TEX_ATTRIBUTE = "data-tex"  # the formula's TeX, on its element


class TeXError(ValueError):
    """MathJax could not read a formula's TeX."""


class Typesetter:
    """MathJax in one node process, asked one formula at a time (started on first use, in each process)."""

    def __init__(self, modules: Path):
        node = shutil.which("node")
        if node is None:
            raise ExtensionError("expected node (Debian's nodejs, which `make book` installs) to typeset the "
                                 "formulas; found no `node` on PATH")
        self.errors = tempfile.TemporaryFile()  # node's messages, read when it stops (a pipe nobody reads can fill)
        self.process = subprocess.Popen([node, str(SCRIPT), str(modules), FONT_URL, str(SCALE)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                                        text=True, encoding="utf-8")
        self.pid = os.getpid()
        atexit.register(self.close)

    def ask(self, request: list) -> dict:
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.process.kill()
            self.errors.seek(0)
            said = self.errors.read().decode("utf-8", "replace")[-2000:]
            raise ExtensionError(f"expected MathJax in node to answer, but it stopped: {said}")
        return json.loads(line)

    def typeset(self, tex: str, display: bool) -> str:
        answer = self.ask([tex, display])
        if "error" in answer:
            raise TeXError(answer["error"])
        return answer["html"]

    def stylesheet(self) -> str:
        return self.ask(["stylesheet"])["css"]

    def close(self) -> None:
        if self.process.poll() is None and self.pid == os.getpid():
            self.process.stdin.close()
            self.process.wait(timeout=30)


_TYPESETTER: Typesetter | None = None


def typesetter() -> Typesetter:
    """This process's typesetter (a parallel build's forked writers each start their own)."""
    global _TYPESETTER  # noqa: PLW0603 - one node process per build process, started when first needed
    if _TYPESETTER is None or _TYPESETTER.pid != os.getpid():
        _TYPESETTER = Typesetter(assets.node_modules())
    return _TYPESETTER


def typeset(translator, node: nodes.Node, tex: str, display: bool) -> str:
    """The formula as MathJax's CommonHTML; on a TeX error a warning at its source and the TeX shown as text."""
    try:
        return typesetter().typeset(tex, display)
    except TeXError as error:
        logger.warning('MathJax cannot typeset "%s": %s', tex, error, location=node, type="attnlib", subtype="math")
        return f'<code class="attnlib-tex-error">{translator.encode(tex)}</code>'


def visit_math(self, node: nodes.math) -> None:
    tex = node.astext()
    self.body.append(self.starttag(node, "span", "", CLASS=CLASSES, **{TEX_ATTRIBUTE: tex}))
    self.body.append(typeset(self, node, tex, display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node: nodes.math_block) -> None:
    """As ``sphinx.ext.mathjax``'s: the number and its permalink before the formula; paragraphs of a block (blank
    lines) aligned as one formula, a part with ``\\\\`` split over lines."""
    self.body.append(self.starttag(node, "div", CLASS=CLASSES, **{TEX_ATTRIBUTE: node.astext()}))
    if node["nowrap"]:
        tex = node.astext()
    else:
        if node["number"]:
            number = get_node_equation_number(self, node)
            self.body.append(f'<span class="eqno">({number})')
            self.add_permalink_ref(node, _("Link to this equation"))
            self.body.append("</span>")
        parts = [rf"\begin{{split}}{part}\end{{split}}" if r"\\" in part else part
                 for part in node.astext().split("\n\n") if part.strip()]
        joined = "\\\\".join(parts)  # TeX's line break between the parts
        tex = rf"\begin{{align}}\begin{{aligned}}{joined}\end{{aligned}}\end{{align}}" if len(parts) > 1 else joined
    self.body.append(typeset(self, node, tex, display=True) + "</div>\n")
    raise nodes.SkipNode


def write_stylesheet(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: the fonts' stylesheet every page links (the fonts themselves: ``vendor_assets``)."""
    if exception is not None or app.builder is None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / STYLESHEET
    target.parent.mkdir(parents=True, exist_ok=True)
    css = typesetter().stylesheet()
    if not target.is_file() or target.read_text(encoding="utf-8") != css:
        target.write_text(css, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.add_html_math_renderer(RENDERER, (visit_math, None), (visit_displaymath, None))
    app.add_css_file(STYLESHEET)
    app.connect("build-finished", write_stylesheet)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
