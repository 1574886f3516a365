"""Sphinx extension: the site meets WCAG 2.1 AA, reflows on a phone and prints whole.

What it does, and why here: the causes sit in our build's inputs or in upstream code we do not fork.

* **Figures' text alternatives.** ``attnlib.views.images.figure_png`` writes a description computed from
  the figure (title, axes, colour bar, the pattern) into each PNG's ``Description`` text chunk, and the
  scale it was drawn at into ``attnlib-scale``. myst-nb gives notebook images their file path as
  ``alt``; ``describe_images`` (``doctree-read``) sets the description instead, and the CSS size of a
  2x image, so it is sharp on high-density screens and the same size as before everywhere else.
* **Figures' text size.** ``figure_png`` also writes the figure's smallest text in CSS px (``attnlib-text-px``);
  ``mark_text_sizes`` puts it on each page's ``<img>`` as ``data-attnlib-text-px``, where the browser tests
  multiply it by the scale the page shows the figure at (a wide figure in the column is scaled down).
* **Markup the theme and sphinxcontrib-bibtex write.** ``fix_page_html`` rewrites each page after it
  is written: the reference list's deprecated ``doc-biblioentry`` role becomes ``listitem`` (its
  ``role="list"`` parent then has the children ARIA requires); controls whose ``aria-label`` does
  not contain their visible name get one that does (WCAG 2.5.3 label in name): theme buttons and
  links, myst-nb's "Show code cell source" toggles, and the colour-mode button, whose icons' titles
  become decorative while ``a11y.js`` names the current mode in its label.
* **What runs in the browser** (``a11y.js``): the ipywidgets sliders get their name and spoken value
  (``aria-label``, ``aria-valuetext`` from the readout, not the option's index), each explorer a live
  region that says which state is shown, and the theme's run-time elements their missing names.
* **Layout** (``a11y.css``): reflow at 320 px (inline code wraps, wide outputs scroll inside
  themselves, explorer controls stack), readable explorer tables in dark mode, and print rules
  (code wraps instead of being cut, no sidebars, views fit the page). ``make pdf`` prints with them.

Both files live in ``attnsite/static/`` (not a source ``_static/``, which JB1 would add to every page a
second time) and are copied into ``_static/attnlib/`` of the output.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from PIL import Image
from sphinx.application import Sphinx
from sphinx.util import logging

# the PNG text chunks figure_png writes, and the attribute that gives a figure's smallest text to the browser
from attnlib.views.images import ALT_KEY, CELL_TEXT_KEY, SCALE_KEY, TEXT_ATTRIBUTE, TEXT_KEY

from .site_assets import STATIC_DIR, copy_static

logger = logging.getLogger(__name__)
FILES = {"css": "a11y.css", "js": "a11y.js"}
PHONE_COLUMN = 358  # CSS px an image may take on a 390 px phone (the theme's margins)
LEGIBLE_PX = 9  # the smallest text a figure may show on a phone


# --- figures ------------------------------------------------------------------------------------------


def _image_file(app: Sphinx, docname: str, uri: str) -> Path | None:
    for candidate in (Path(uri), Path(app.srcdir) / uri, Path(app.srcdir) / Path(docname).parent / uri):
        if candidate.is_file():
            return candidate
    return None


def png_description(path: Path) -> tuple[str | None, int]:
    """(alt text, scale) stored in a PNG by ``figure_png``; (None, 1) when it has none."""
    try:
        with Image.open(path) as image:
            text = dict(getattr(image, "text", {}) or {})
            size = image.size
    except OSError:
        return None, 1
    scale = int(text.get(SCALE_KEY, "1") or 1)
    describe_images.sizes[str(path)] = size
    describe_images.cell_text[str(path)] = float(text[CELL_TEXT_KEY]) if CELL_TEXT_KEY in text else None
    return text.get(ALT_KEY), max(scale, 1)


def shrinks_illegibly(css_width: int, cell_text_px: float | None) -> bool:
    """Whether fitting an image ``css_width`` wide into a phone's column would make its cell numbers smaller
    than ``LEGIBLE_PX``. Such an image keeps its size on a phone and scrolls sideways in its output box."""
    return cell_text_px is not None and cell_text_px * min(1.0, PHONE_COLUMN / css_width) < LEGIBLE_PX


def describe_images(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read``: every notebook image gets the description its PNG carries, and its CSS size."""
    docname = app.env.docname
    for image in doctree.findall(nodes.image):
        path = _image_file(app, docname, image["uri"])
        if path is None or path.suffix.lower() != ".png":
            continue
        alt, scale = png_description(path)
        if alt:
            image["alt"] = alt
        width, height = describe_images.sizes.get(str(path), (0, 0))
        if scale > 1:
            image["width"], image["height"] = str(-(-width // scale)), str(-(-height // scale))
        if width and shrinks_illegibly(-(-width // scale), describe_images.cell_text.get(str(path))):
            image["classes"].append("attnlib-wide-figure")


describe_images.sizes = {}
describe_images.cell_text = {}


def mark_solutions(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read``: nbgrader answer cells get the class ``attnlib-solution``.

    The print edition for students (``make pdf``) leaves them out; the instructors' edition keeps them.
    """
    for cell in doctree.findall(nodes.container):
        grading = (cell.get("cell_metadata") or {}).get("nbgrader") or {}
        if cell.get("nb_element") == "cell_code" and grading.get("solution") and not grading.get("grade"):
            cell["classes"].append("attnlib-solution")


# --- the written pages --------------------------------------------------------------------------------

_BIBLIOENTRY = re.compile(r'role="doc-biblioentry"')
# myst-nb's hide-input toggles: "Show code cell source" on screen, "Toggle hidden content" to a screen reader
_SUMMARY_LABEL = re.compile(r'<summary aria-label="Toggle hidden content">')
# the theme's colour-mode icons carry titles ("Light", "Dark") that FA turns into the button's visible text
_MODE_ICON = re.compile(r'(<i class="theme-switch [^"]*"[^>]*?) title="[^"]*"')
_BUTTON = re.compile(r"<(button|a)\b([^>]*)>(.*?)</\1>", re.DOTALL)
_ARIA_LABEL = re.compile(r'\saria-label="([^"]*)"')
_TAGS = re.compile(r"<[^>]+>")


def _label_in_name(match: re.Match) -> str:
    """A button or link whose ``aria-label`` lacks its visible text gets an ``aria-label`` that starts with it."""
    tag, attributes, inner = match.groups()
    label = _ARIA_LABEL.search(attributes)
    visible = " ".join(_TAGS.sub(" ", inner).split())
    if label is None or not visible or visible.lower() in label.group(1).lower():
        return match.group(0)
    fixed = _ARIA_LABEL.sub(f' aria-label="{visible}: {label.group(1)}"', attributes, count=1)
    return f"<{tag}{fixed}>{inner}</{tag}>"


# pydata-sphinx-theme's layout loads the search tools and the whole search index (34 kB gzip) in every page's head,
# render-blocking: deferred, they run in the same order before the search's own start (DOMContentLoaded)
_SEARCH_SCRIPTS = re.compile(r'<script src="([^"]*(?:_static/searchtools|_static/language_data|searchindex)\.js)">')


# the search page's own script (attnsite/static/search.js, added by theme.py) patches Sphinx's Search and Scorer: it
# must run after searchtools.js defines them and before searchindex.js runs the query. Deferred scripts run in the
# order they are written, and Sphinx writes its search scripts last: the patch, written before them, found no Search
_SEARCH_PATCH = re.compile(r'\s*<script defer="defer" src="[^"]*_static/attnlib/search\.js[^"]*"></script>')
_SEARCHTOOLS = re.compile(r'<script defer="defer" src="[^"]*_static/searchtools\.js"></script>')


def _search_patch_after_searchtools(text: str) -> str:
    patch, tools = _SEARCH_PATCH.search(text), _SEARCHTOOLS.search(text)
    if patch is None or tools is None or patch.start() > tools.start():
        return text
    text = text[:patch.start()] + text[patch.end():]
    tools = _SEARCHTOOLS.search(text)
    return text[:tools.end()] + patch.group(0) + text[tools.end():]


def fix_html(text: str) -> str:
    """The fixes ``fix_page_html`` makes to one page's HTML."""
    text = _search_patch_after_searchtools(_SEARCH_SCRIPTS.sub(r'<script defer="defer" src="\1">', text))
    text = _BIBLIOENTRY.sub('role="listitem"', text)
    text = _SUMMARY_LABEL.sub("<summary>", text)
    text = _MODE_ICON.sub(r"\1", text)
    return _BUTTON.sub(_label_in_name, text)


_PNG_IMG = re.compile(r'<img\b(?![^>]*\bdata-attnlib-text-px=)(?P<attributes>[^>]*?\bsrc="(?P<src>[^"]+\.png)"[^>]*)>')


def _text_px(path: Path) -> str | None:
    try:
        with Image.open(path) as image:
            return dict(getattr(image, "text", {}) or {}).get(TEXT_KEY)
    except OSError:
        return None


def mark_text_sizes(text: str, folder: Path) -> str:
    """Each ``<img>`` of a PNG (a file beside the page) that carries its smallest text size (``attnlib-text-px``)
    gets it as ``data-attnlib-text-px``: the browser tests multiply it by the figure's scale on the page."""
    def add(match: re.Match) -> str:
        size = _text_px(folder / match["src"])
        return match.group(0) if size is None else f'<img {TEXT_ATTRIBUTE}="{size}"{match["attributes"]}>'

    return _PNG_IMG.sub(add, text)


def fix_page_html(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: copy a11y.css/js into the output and rewrite every page's markup fixes."""
    if exception is not None or app.builder is None or app.builder.format != "html":
        return
    copy_static(app.outdir, FILES.values())
    changed = 0
    for page in Path(app.outdir).rglob("*.html"):
        if "_static" in page.parts:
            continue
        text = page.read_text(encoding="utf-8")
        fixed = mark_text_sizes(fix_html(text), page.parent)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")
            changed += 1
    logger.info(f"a11y: fixed the markup of {changed} pages")


def setup(app: Sphinx) -> dict:
    """Register the image descriptions, the page fixes and the site's CSS and JavaScript."""
    app.connect("doctree-read", describe_images)
    app.connect("doctree-read", mark_solutions)
    app.connect("build-finished", fix_page_html)
    app.add_css_file(f"{STATIC_DIR}/{FILES['css']}", priority=900)
    app.add_js_file(f"{STATIC_DIR}/{FILES['js']}", defer="defer", priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
