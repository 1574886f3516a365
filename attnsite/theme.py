"""Sphinx extension: the theme's shell as a reader meets it: navigation that opens on a phone, equations numbered
per chapter, link previews, a titled root page, and search results without raw TeX.

* **One header, toggles that work.** pydata-sphinx-theme 0.17 renders its own header band (a search field and a
  second pair of ``.primary-toggle``/``.secondary-toggle`` buttons) above sphinx-book-theme's article header.
  Both themes' scripts bind ``document.querySelector(".primary-toggle")``: the header's copy, which is hidden
  under 992 px, so the visible ☰ and contents buttons did nothing on a phone, and on a laptop the ☰ could not
  collapse the sidebar and two search boxes showed (pydata-sphinx-theme#2451, sphinx-book-theme#999; the open fix,
  sphinx-book-theme PR #1000, removes the header's buttons). The header is drawn only when a ``navbar_*`` list
  is set; pydata-sphinx-theme fills ``navbar_persistent`` with its search field unless the user set it, so
  ``set_theme_options`` sets all four empty: no header band, one toggle of each kind, one search box.
* **Equations numbered per chapter** ((3.2), not (52)): the toctree is not numbered (the chapters carry their
  numbers in their titles), so Sphinx counts display equations across the whole book. ``number_equations``
  (``env-get-updated``, after Sphinx assigned its numbers) renumbers each page's equations in page order under
  the chapter's number, read from its file name (``03_softmax`` -> 3), or a page's letter (the background page ->
  B, the going-further pages -> G and P: (G.1) is no chapter's). Both the equation's label and every ``{eq}``
  reference read these numbers.
* **Link previews**: every page gets ``description`` and Open Graph meta tags from its first paragraph.
* **The root ``index.html``** forwards to the first page and has a title, a description and a link.
* **Search** (``search.js`` on the search page): snippets without TeX source or the page's printed contents
  list, and a page whose own title holds the word ranked above pages that only mention it in a section title.

Registered in ``_config.yml`` under ``sphinx: extra_extensions``.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

from attncourse.exercise_cells import chapter_number

from .site_assets import STATIC_DIR, copy_static

LOGGER = logging.getLogger(__name__)
NAVBAR_OPTIONS = ("navbar_start", "navbar_center", "navbar_end", "navbar_persistent")
SEARCH_JS = "search.js"
DESCRIPTION_CHARS = 200


def set_theme_options(app: Sphinx, config) -> None:
    """``config-inited``: no pydata-sphinx-theme header band (see the module docstring)."""
    options = dict(config.html_theme_options or {})
    for name in NAVBAR_OPTIONS:
        options[name] = []
    config.html_theme_options = options


# --- equations numbered per chapter -------------------------------------------------------------------------


# pages outside the numbered chapters whose equations are numbered under a letter of their own
PAGE_LABELS = {"background": "B", "appendix_growing_logits": "G", "appendix_positions": "P"}


def chapter_label(docname: str) -> str | None:
    """The prefix of a page's equation numbers: ``'3'`` for ``book/03_softmax``, a letter for the pages of
    ``PAGE_LABELS`` (the background page: B; the going-further pages: G, growing logits, and P, positions), None
    for other pages (their equations keep a plain count)."""
    stem = docname.rsplit("/", 1)[-1]
    number = chapter_number(stem)
    return str(number) if number is not None else PAGE_LABELS.get(stem)


def chapter_numbers(docname: str, numbers: dict[str, tuple]) -> dict[str, tuple]:
    """``{equation id: number}`` of one page renumbered 1, 2, ... in the order Sphinx counted them, under the
    page's ``chapter_label``."""
    label = chapter_label(docname)
    ordered = sorted(numbers, key=lambda key: numbers[key])
    return {key: ((label, i) if label else (i,)) for i, key in enumerate(ordered, start=1)}


def number_equations(app: Sphinx, env) -> list[str]:
    """``env-get-updated``: each page's display equations numbered per chapter; returns the pages whose numbers
    changed (Sphinx rewrites them)."""
    if not (app.config.math_numfig and app.config.numfig):
        return []
    changed = []
    for docname, kinds in env.toc_fignumbers.items():
        if "displaymath" in kinds:
            renumbered = chapter_numbers(docname, kinds["displaymath"])
            if renumbered != kinds["displaymath"]:
                kinds["displaymath"] = renumbered
                changed.append(docname)
    return changed


# --- link previews --------------------------------------------------------------------------------------------

_PARAGRAPH = re.compile(r"<p>(.*?)</p>", re.DOTALL)
_TAGS = re.compile(r"<[^>]+>")
_TEX = re.compile(r"\\[()\[\]]")


def describe_page(body: str, limit: int = DESCRIPTION_CHARS) -> str:
    """The first paragraph of a page's body as plain text (math delimiters dropped), cut at a word to ``limit``."""
    for match in _PARAGRAPH.finditer(body or ""):
        text = " ".join(_TEX.sub("", html.unescape(_TAGS.sub("", match.group(1)))).split())
        if len(text) >= 40:
            if len(text) > limit:
                text = text[: limit - 1].rsplit(" ", 1)[0] + "…"
            return text
    return ""


def site_title(app: Sphinx) -> str:
    """The book's title (``_config.yml``'s ``title``, which Jupyter Book passes as ``html_title``)."""
    return app.config.html_title or app.config.project or "Home"


def add_meta_tags(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """``html-page-context``: description and Open Graph tags, and ``search.js`` on the search page."""
    if pagename == "search":
        app.builder.add_js_file(f"{STATIC_DIR}/{SEARCH_JS}", defer="defer", priority=900)
    site = site_title(app)
    title = _TAGS.sub("", html.unescape(context.get("title") or site))
    description = describe_page(context.get("body", "")) or site
    tags = [("name", "description", description), ("property", "og:title", title),
            ("property", "og:description", description), ("property", "og:type", "article"),
            ("property", "og:site_name", site), ("name", "twitter:card", "summary")]
    meta = "".join(f'<meta {kind}="{name}" content="{html.escape(value, quote=True)}" />\n'
                   for kind, name, value in tags)
    context["metatags"] = context.get("metatags", "") + meta


# --- the root page --------------------------------------------------------------------------------------------

ROOT_PAGE = """<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8" />
<title>{title}</title>
<meta name="description" content="{description}" />
<meta property="og:title" content="{title}" />
<meta property="og:description" content="{description}" />
<meta name="viewport" content="width=device-width, initial-scale=1" />
<meta http-equiv="Refresh" content="0; url={url}" />
<link rel="canonical" href="{url}" />
</head><body><p><a href="{url}">{title}</a></p></body></html>
"""


def write_root_page(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished`` (before sphinx-external-toc, which writes a bare forward only where none exists):
    the root ``index.html`` forwards to the first page with a title and a description; and ``search.js``."""
    if exception is not None or app.builder is None or app.builder.format != "html":
        return
    copy_static(app.outdir, [SEARCH_JS])
    if app.config.master_doc == "index":
        return
    first = (Path(app.outdir) / f"{app.config.master_doc}.html")
    body = first.read_text(encoding="utf-8") if first.is_file() else ""
    main = body.split('role="main"', 1)[-1]
    site = site_title(app)
    values = {key: html.escape(value, quote=True) for key, value in (
        ("lang", app.config.language or "en"), ("title", site), ("url", f"{app.config.master_doc}.html"),
        ("description", describe_page(main) or site))}
    (Path(app.outdir) / "index.html").write_text(ROOT_PAGE.format(**values), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    """Register the theme options, the equation numbers, the meta tags and the root page."""
    app.connect("config-inited", set_theme_options)
    app.connect("env-get-updated", number_equations, priority=900)
    app.connect("html-page-context", add_meta_tags)
    app.connect("build-finished", write_root_page, priority=300)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
