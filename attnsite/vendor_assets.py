"""Sphinx extension: serve the npm-installed browser libraries from the site itself.

At the end of an HTML build it copies every file listed by ``site_assets.site_files()``
(require.js, d3, jQuery, the ipywidgets html-manager, MathJax's fonts) from
``node_modules/`` into ``<outdir>/_static/_vendor/``. Only the *output* gets them: Jupyter Book 1
adds every .js/.css of a *source* ``_static/`` folder to every page, so they are never copied into
the repository. ``_config.yml`` points ``nb_ipywidgets_js`` at these copies, and the formulas, typeset
when the site is built (``typeset_math.py``), are drawn in the fonts: no page loads anything from a CDN.

It also replaces the theme's all-icons ``fontawesome.js`` (542 kB gzipped on every page) by Font
Awesome's core with only the icons the site names (``fontawesome_subset.py``).

It also drops duplicate ``<script>`` elements from every page:
Sphinx 7.4 registers an inline script added with ``add_js_file(None, body=...)`` twice (once as
``None``, once as ``''``), and sphinx-thebe's ``const THEBE_JS_URL = ...`` then throws
"Identifier has already been declared".

Last, it makes the BertViz pages lighter: a notebook's first BertViz view inlines d3 and jQuery (about
320 kB, ``attnlib.views.html.libraries_script``) so that it works offline in JupyterLab. That ``<script>``
element carries ``data-vendored="d3 jquery"`` (``attnlib.views.html.VENDORED_ATTRIBUTE``); in the built page
every such element, whatever attnlib version wrote its text, becomes ``<script src>`` elements for the npm
copies in ``_static/_vendor/`` (``libraries_loader``), which the browser caches across pages. The notebook
and its stored output stay as they are.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

from attnlib.views import html as views_html

from . import site_assets as assets
from .fontawesome_subset import write_subset

logger = logging.getLogger(__name__)
FONTAWESOME = "@fortawesome/fontawesome-free"  # npm, the version pydata-sphinx-theme bundles (6.5.2)


def copy_vendored(app: Sphinx, exception: Exception | None) -> None:
    """Copy the vendored libraries into the HTML output (build-finished handler)."""
    if exception is not None or app.builder is None or app.builder.format != "html":
        return
    try:
        pairs = assets.site_files()
    except FileNotFoundError as error:
        raise ExtensionError(f"vendored JavaScript missing: {error}") from error
    outdir = Path(app.outdir)
    for source, site_path in pairs:
        destination = outdir / site_path
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    icons = write_subset(outdir, assets.node_modules() / FONTAWESOME)
    linked = [page.name for page in sorted(outdir.rglob("*.html")) if link_libraries(page, outdir)]
    logger.info(f"vendor_assets: copied {len(pairs)} files from node_modules into {outdir / assets.VENDOR_DIR}; "
                f"the theme's fontawesome.js now carries the {icons} icons the site uses; "
                f"d3 and jQuery now load from there on {linked}")


# a <script> element: its start tag's attributes, then its text up to the first "</script" (HTML's raw-text rule)
_SCRIPT_ELEMENT = re.compile(r"<script\b(?P<attributes>[^>]*)>.*?</script\s*>", re.DOTALL | re.IGNORECASE)
_VENDORED = re.compile(rf'\s{views_html.VENDORED_ATTRIBUTE}="(?P<names>[^"]*)"')
_URL = re.compile(r"[^\s\"<>&']+\.js")  # a plain relative URL that an attribute holds as it is


def libraries_loader(d3_url: str, jquery_url: str) -> str:
    """What ``attnlib.views.html.libraries_script()`` does, with d3 and jQuery loaded from URLs, not inlined.

    ``define`` is hidden while the two bundles run, so they set their globals even with require.js on the
    page; then both go to ``window.attnlibBertviz`` (``attnlib.views.html.GLOBAL``, where the views' runner
    waits for them) and the page's own ``d3``, ``$`` and ``jQuery`` are restored.
    """
    for url in (d3_url, jquery_url):
        if not isinstance(url, str) or not _URL.fullmatch(url):
            raise ValueError(f"expected a plain relative URL to a .js file, got {url!r}")
    name = views_html.GLOBAL
    before = (f'if (!window.{name}) {{ window.attnlibLoading = {{ had: "d3" in window, d3: window.d3, '
              f'define: window.define }}; window.define = undefined; }}')
    after = (f'(function () {{\nvar s = window.attnlibLoading;\nif (!s) {{ return; }}\n'
             f'window.define = s.define; delete window.attnlibLoading;\n'
             f'var libs = {{ d3: window.d3, $: window.jQuery.noConflict(true) }};\n'
             f'if (s.had) {{ window.d3 = s.d3; }} else {{ delete window.d3; }}\n'
             f'window.{name} = libs;\n}})();')
    return (f'<script>{before}</script>\n<script src="{d3_url}"></script>\n'
            f'<script src="{jquery_url}"></script>\n<script>\n{after}\n</script>\n')


def link_vendored(html: str, up: str) -> tuple[str, int]:
    """``html`` with every ``<script data-vendored="d3 jquery">`` element replaced by ``libraries_loader``
    for the site's copies (``up``: the relative URL of the site root from the page); and how many there were.

    The element is found by its attribute, not by its text: a page written by another attnlib (another
    inline copy) is linked the same way. An element naming other libraries is an error.
    """
    expected, found = " ".join(views_html.LIBRARY_FILES), []

    def replace(match: re.Match) -> str:
        vendored = _VENDORED.search(match["attributes"])
        if vendored is None:
            return match.group(0)
        found.append(vendored["names"])
        if vendored["names"] != expected:
            raise ExtensionError(f'expected {views_html.VENDORED_ATTRIBUTE}="{expected}" (the libraries attnlib\'s '
                                 f'views inline), got "{vendored["names"]}"')
        return libraries_loader(*(f"{up}/{assets.site_url(name)}" for name in views_html.LIBRARY_FILES))

    linked = _SCRIPT_ELEMENT.sub(replace, html)
    return linked, len(found)


def link_libraries(page: Path, outdir: Path) -> bool:
    """Link the vendored copies in place of the inline d3 + jQuery of ``page`` (``link_vendored``).

    Returns whether the page had an inline copy.
    """
    text = page.read_text(encoding="utf-8")
    linked, count = link_vendored(text, os.path.relpath(outdir, page.parent).replace(os.sep, "/"))
    if count:
        page.write_text(linked, encoding="utf-8")
    return count > 0


def _script_key(script) -> tuple:
    attributes = getattr(script, "attributes", {})
    return (getattr(script, "filename", script) or "", getattr(script, "priority", 500),
            tuple(sorted((k, str(v)) for k, v in attributes.items())))


def finish_page_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Per page (html-page-context, runs last): keep the first of identical ``<script>`` entries."""
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, unique = set(), []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app: Sphinx) -> dict:
    """Register the copy step and the per-page script fixes."""
    app.connect("build-finished", copy_vendored)
    app.connect("html-page-context", finish_page_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
