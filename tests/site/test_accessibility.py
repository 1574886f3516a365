"""Accessibility of the built website (WCAG 2.1 AA), tried in headless Chromium as readers use it.

Every page of the built site (every ``.html`` page ``make book`` wrote, not a fixed list) is opened in
light and dark mode at 1280 px and 390 px; axe-core (npm, ``package.json``) is injected and must find
no violation of its ``wcag2a``, ``wcag2aa``, ``wcag21a`` and ``wcag21aa`` rules. Best-practice findings
(read in light mode: they do not depend on it) are counted and printed per page (and written to
``_build/a11y/axe.json``), not failed. The tests of one page run together in one worker
(tools/pytest_scheduler.py), the pages spread over the workers.

One load per page and width carries every check: the light and dark runs switch the mode on it, the formulas,
figures and header are measured on it (reader_check.js), the 320 px reflow check narrows the phone's window, and
the tests that only read a page take it as axe left it; a test that changes it (keys, taps, toggles) says so
(``touched``), and the next test loads it afresh.

Also: no figure's text alternative is a file path or a generic word; no page is wider than a 320 px
screen (WCAG 1.4.10 reflow: code blocks may scroll inside themselves, the page may not); every
explorer control is reached with Tab and changed with the arrow keys, and the shown state follows;
BertViz's head toggles and thumbnails work from the keyboard.

The browsers draw classic scrollbars (as on Windows and most Linux desktops), and every page state axe reads
(each page light and dark at both widths, explorers moved, a BertViz head enlarged) is also looked at:
``tests/site/js/visual_check.js`` counts needless scrollbars, elements sticking out of their column, text cut
with an ellipsis and controls under 24 x 24 CSS px (0 allowed), and a half-scale JPEG (the whole page, or in two of
the four mode and width states its first screen: ``WHOLE_PAGE_STATES``) is kept in ``_build/screenshots/`` with a
contact sheet, ``_build/screenshots/index.html``, to look at them all.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import html
import json
import os
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests import browser_utils as bu
from tests.browser_utils import print_book  # attnsite/print_book.py

pytestmark = pytest.mark.browser

SITE = Path(os.environ.get("ATTNLIB_SITE_HTML", bu.REPO / "_build" / "html"))
REPORT = SITE.parent / "a11y" / "axe.json"
SCREENSHOTS = SITE.parent / "screenshots"  # half-scale JPEGs of every page state the tests read, index.html
VISUAL_CHECK = Path(__file__).parent / "js" / "visual_check.js"
READER_CHECK = Path(__file__).parent / "js" / "reader_check.js"
AXE, WCAG_TAGS = bu.AXE, bu.WCAG_TAGS
MODES = ["light", "dark"]
WIDTHS = [1280, 390]
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static", "_panels_static"}
GENERIC_ALT = {"", "figure", "image", "img", "png", "plot", "chart", "graph", "picture", "output", "none"}


def site_pages(site: Path = SITE) -> list[str]:
    """Every page of the built site, as paths relative to it ('book/01_dot_products.html'); redirects left out."""
    if not site.is_dir():
        return []
    pages = []
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site)
        if SKIP_DIRS & set(relative.parts):
            continue
        head = path.read_text(encoding="utf-8", errors="replace")[:2000].lower()
        if 'http-equiv="refresh"' in head:
            continue  # index.html only forwards to the root page
        pages.append(relative.as_posix())
    return pages


PAGES = site_pages()


def _require_site() -> None:
    if not PAGES:
        pytest.fail(f"expected the built book in {SITE}: run `make book` first", pytrace=False)
    if not AXE.is_file():
        pytest.fail(f"expected axe-core at {AXE}: run `npm ci` (make setup)", pytrace=False)


# --- opening a page and waiting until everything is drawn -----------------------------------------------

READY = print_book.READY  # the same wait as the print edition: math typeset, widgets and views drawn
OPENED = "return window.attnlibTestOpened || null;"  # set on the page by open_page: gone after any navigation
SET_MODE, SETTLED = bu.SET_MODE, bu.SETTLED


def open_page(driver, base_url: str, page: str, mode: str = "light", reuse: bool = False) -> bool:
    """Load ``page`` in ``mode``; returns whether widgets, MathJax and BertViz finished drawing.

    With ``reuse``, a page this driver already shows (drawn, opened with reuse, and so far only read: by
    axe-core, or by a test that measures it) is not loaded again: only its mode is switched, as the theme's
    own switch does (a fresh load gets its mode the same way, after loading), and the colour transitions are
    waited out. A test that then changes the page (keys pressed, views toggled) calls ``touched`` first, so
    the next test loads it afresh: every test still starts from the page as a reader first sees it.
    """
    opened = driver.execute_script(OPENED) if reuse else None
    if opened and opened["page"] == page and opened["ready"]:
        driver.execute_script(SET_MODE, mode)
        driver.execute_async_script(SETTLED)
        driver.execute_script("window.attnlibA11y && window.attnlibA11y.fixAll();")
        return True
    driver.get(f"{base_url}{page}")
    driver.execute_script(SET_MODE, mode)
    ready = driver.execute_async_script(READY)
    driver.execute_script("window.attnlibA11y && window.attnlibA11y.fixAll();")
    time.sleep(0.2)
    if reuse:  # until a test changes it (``touched``), the next test may take the page as it is
        driver.execute_script("window.attnlibTestOpened = {page: arguments[0], ready: arguments[1]};", page, ready)
    return ready


def touched(driver) -> None:
    """Say that the shown page is about to change (keys, toggles): the next ``open_page`` loads it again."""
    driver.execute_script("window.attnlibTestOpened = null;")


@pytest.fixture(scope="module")
def server():
    _require_site()
    bu.require_chromium()
    with bu.serve(SITE) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def browsers(server):
    """One Chromium per window width, opened on first use."""
    opened, stack = {}, []

    def get(width: int):
        if width not in opened:
            context = bu.chromium(width=width, height=900, scrollbars=True)
            opened[width] = context.__enter__()
            opened[width].set_script_timeout(180)
            stack.append(context)
        return opened[width]

    yield get
    for context in reversed(stack):
        context.__exit__(None, None, None)


# --- what a person sees: the visual check and the screenshots ----------------------------------------------


@functools.cache
def _visual_check() -> str:
    return VISUAL_CHECK.read_text(encoding="utf-8")


def visual_problems(driver) -> list[dict]:
    """``visual_check.js`` on the page as it is drawn now: [{kind, selector, detail}], empty when it looks right."""
    return driver.execute_script("return eval(arguments[0]);", _visual_check())


def describe_problems(problems: list[dict], limit: int = 25) -> str:
    counts: dict[str, int] = {}
    for problem in problems:
        counts[problem["kind"]] = counts.get(problem["kind"], 0) + 1
    return (", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) + "\n"
            + "\n".join(f"  {p['kind']}: {p['selector']}: {p['detail']}" for p in problems[:limit])
            + (f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""))


def _shot_name(page: str, state: str) -> str:
    return f"{page.removesuffix('.html').replace('/', '__')}--{state}"


CONTACT_SHEET = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Screenshots of the built site</title>
<style>body{{font-family:sans-serif;margin:1em}} h2{{font-size:1em;margin:1.2em 0 .3em}}
figure{{display:inline-block;vertical-align:top;margin:0 .6em .6em 0;text-align:center}}
img{{border:1px solid #888;width:160px;height:240px;object-fit:cover;object-position:top}}
figcaption{{font-size:.8em;max-width:160px}} .bad{{color:#b00020;font-weight:bold}}</style></head>
<body><h1>Screenshots of the built site ({count} page states)</h1>
<p>Half-scale, whole page, as <code>tests/site/test_accessibility.py</code> last saw each page and state; a
thumbnail opens the image. The problem counts are those of <code>tests/site/js/visual_check.js</code>.</p>
{pages}
</body></html>
"""


def write_contact_sheet(folder: Path = SCREENSHOTS) -> Path:
    """``folder/index.html``: every screenshot in ``folder`` as a thumbnail linking to it, grouped by page.

    Written once per test process, when it ends (``tests/site/conftest.py``), under a lock and replaced in one
    step: each pytest-xdist worker writes after all its shots, so whoever writes last lists every shot."""
    index = folder / "index.html"
    with open(folder / ".index.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        groups: dict[str, list[str]] = {}
        for shot in sorted(folder.glob("*.jpg")):
            page, _, state = shot.stem.partition("--")
            problems = folder / f"{shot.stem}.json"
            count = len(json.loads(problems.read_text(encoding="utf-8"))) if problems.is_file() else None
            note = "" if count is None else (f" <span class=bad>{count} problems</span>" if count else " ok")
            groups.setdefault(page, []).append(
                f'<figure><a href="{html.escape(shot.name)}"><img src="{html.escape(shot.name)}" loading="lazy" '
                f'alt="{html.escape(page)}, {html.escape(state)}"></a><figcaption>{html.escape(state)}{note}'
                f"</figcaption></figure>")
        pages = "\n".join(f"<h2>{html.escape(page.replace('__', '/'))}</h2>\n" + "\n".join(figures)
                          for page, figures in groups.items())
        tmp = index.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(CONTACT_SHEET.format(count=sum(map(len, groups.values())), pages=pages), encoding="utf-8")
        tmp.replace(index)
    return index


SHOTS_TAKEN: list[str] = []  # this process's screenshots (tests/site/conftest.py then writes the contact sheet)


# The page states whose screenshot shows the whole page; the other two show the first screen. Each mode is seen whole
# at one width: a chapter's whole page costs ~2 CPU-s to draw, and the visual check (the proof) reads every state
# whole either way.
WHOLE_PAGE_STATES = {"light-1280", "dark-390"}


def look_at(driver, page: str, state: str, whole: bool = True) -> list[dict]:
    """The visual check of the page as it is now, and its half-scale JPEG kept as ``SCREENSHOTS/<page>--<state>``
    (the problems beside it as JSON, both in the contact sheet); returns the problems. The JPEG shows the whole
    page, or with ``whole=False`` its first screen.

    It reads the page the calling test already loaded and checked with axe-core: no load of its own."""
    problems = visual_problems(driver)
    name = _shot_name(page, state)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    # a chapter at 390 px is up to ~58,000 CSS px tall: whole, it is a 195 x 29,000 px JPEG (~1.5 MB)
    height = 64000 if whole else driver.execute_script("return window.innerHeight")
    bu.full_page_screenshot(driver, SCREENSHOTS / f"{name}.jpg", max_height=height, scale=0.5, quality=70)
    (SCREENSHOTS / f"{name}.json").write_text(json.dumps(problems, indent=1), encoding="utf-8")
    SHOTS_TAKEN.append(name)
    return problems


# --- axe-core on every page, light and dark, desktop and phone ------------------------------------------


@pytest.fixture(scope="module")
def axe_results(browsers):
    """{(page, mode, width): violations}, filled as the tests ask (a page's runs share a worker: BY_PAGE)."""
    return {}


run_axe = bu.run_axe
# axe's best-practice rules read the page's structure (landmarks, headings, regions), which the colour mode does not
# change: they run in light mode, at both widths (a phone shows other parts); dark mode runs the WCAG rules
AXE_TAGS = {"light": (*WCAG_TAGS, "best-practice"), "dark": tuple(WCAG_TAGS)}


# figures that attnsite/a11y.py marks as keeping their size on a phone (their cell numbers would be < 9 px)
SHRUNK = """
return Array.from(document.querySelectorAll('img.attnlib-wide-figure'))
  .map(i => [parseFloat(i.style.width) || Number(i.getAttribute('width')), i.getBoundingClientRect().width])
  .filter(([drawn, shown]) => shown + 1 < drawn).map(([drawn, shown]) => drawn + ' shown ' + Math.round(shown));
"""


def _is_wcag(violation: dict) -> bool:
    return bool(set(violation["tags"]) & set(WCAG_TAGS))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("page", PAGES)
def test_axe_finds_no_wcag_violation(page, mode, width, browsers, server, axe_results):
    driver = browsers(width)
    ready = open_page(driver, server, page, mode, reuse=True)  # light, then dark on the same loaded page
    assert ready, f"{page}: widgets, MathJax or BertViz did not finish drawing"
    assert driver.execute_script("return document.documentElement.dataset.theme") == mode
    violations = run_axe(driver, AXE_TAGS[mode])
    axe_results[(page, mode, width)] = violations
    READER[(page, mode, width)] = reader_check(driver)  # formulas, figures, header: read by the tests below
    shrunk = driver.execute_script(SHRUNK)
    assert shrunk == [], f"{page} at {width} px: figures shrunk below their size, cell numbers under 9 px: {shrunk}"
    wcag = [v for v in violations if _is_wcag(v)]
    details = "\n".join(f"  {v['id']} ({v['impact']}, {v['count']} nodes): {v['help']}\n    "
                        + "\n    ".join(f"{n['target']}: {n['summary']}" for n in v["nodes"]) for v in wcag)
    assert wcag == [], f"{page} ({mode}, {width} px): {len(wcag)} WCAG 2.1 A/AA violations\n{details}"
    problems = look_at(driver, page, f"{mode}-{width}", whole=f"{mode}-{width}" in WHOLE_PAGE_STATES)
    assert problems == [], (f"{page} ({mode}, {width} px): {len(problems)} visual problems: "
                            f"{describe_problems(problems)}")


@pytest.mark.parametrize("page", PAGES)
def test_best_practice_findings_are_reported(page, axe_results, capsys):
    """After a page's axe runs: its best-practice findings (reported, not failed; the light runs check them, see
    AXE_TAGS), printed and written to ``_build/a11y/axe/``; REPORT (``axe.json``) merges every page's file."""
    runs = {(page, mode, width) for mode in MODES for width in WIDTHS}
    mine = {key: violations for key, violations in axe_results.items() if key in runs}
    assert set(mine) == runs, f"{page}: axe ran on {len(mine)} of its {len(runs)} mode and width combinations"
    rows: dict[str, set] = {}
    for (_, mode, width), violations in mine.items():
        for v in violations:
            if not _is_wcag(v):
                rows.setdefault(v["id"], set()).add((mode, width))
    total = sum(v["count"] for vs in mine.values() for v in vs if not _is_wcag(v))
    with capsys.disabled():
        print(f"\naxe-core best-practice findings on {page} ({len(mine)} runs): {total} nodes, {len(rows)} rules"
              + "".join(f", {rule} ({len(where)} runs)" for rule, where in sorted(rows.items())))
    folder = REPORT.parent / "axe"
    folder.mkdir(parents=True, exist_ok=True)
    own = folder / f"{page.replace('/', '__')}.json"
    tmp = own.with_suffix(f".{os.getpid()}.tmp")  # replaced in one step: the other worker may be merging them
    tmp.write_text(json.dumps({"|".join(map(str, k)): v for k, v in mine.items()}, indent=1), encoding="utf-8")
    tmp.replace(own)
    merged = {}  # this page's file is written first, so whichever page finishes last merges them all
    for name in sorted(f"{p.replace('/', '__')}.json" for p in PAGES):
        if (folder / name).is_file():
            merged.update(json.loads((folder / name).read_text(encoding="utf-8")))
    tmp = REPORT.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(merged, indent=1), encoding="utf-8")
    tmp.replace(REPORT)


# --- what a reader meets: formulas, figures, the header (measured on test_axe's loads) ---------------------

READER: dict[tuple, dict] = {}  # {(page, mode, width): reader_check.js's measurements}, filled by test_axe
LEGIBLE_TEXT_PX = 9  # the smallest figure text a reader can read in the laptop column (as displayed)
LAPTOP = max(WIDTHS)


@functools.cache
def _reader_check() -> str:
    return READER_CHECK.read_text(encoding="utf-8")


def reader_check(driver) -> dict:
    """``reader_check.js`` on the page as it is drawn now: {equations, figures, navigation}."""
    return driver.execute_script("return eval(arguments[0]);", _reader_check())


def _measured(page: str) -> dict[tuple, dict]:
    runs = {(mode, width): READER.get((page, mode, width)) for mode in MODES for width in WIDTHS}
    missing = [key for key, value in runs.items() if value is None]
    assert not missing, f"{page}: test_axe did not measure the page in {missing} (it runs first, in this worker)"
    return runs


def equation_problems(equations: list[dict], width: int) -> list[str]:
    """What is wrong with a page's display formulas at one width: a number over its formula or left of it; a formula
    cut with no visible way to scroll it; on a laptop, any formula wider than the column."""
    problems = []
    for eq in equations:
        name = f"eq. {eq['number'] or '(unnumbered)'} {eq['id'] or ''} in \"{eq['section']}\"".replace("  ", " ")
        if eq["overlap"] > 1:
            problems.append(f"{name}: its number covers {eq['overlap']} px of the formula")
        if eq["numberLeft"]:
            problems.append(f"{name}: its number stands left of the formula (pydata-sphinx-theme's row-reverse)")
        if eq["hidden"] > 2 and not (eq["scrolls"] and eq["cue"]):
            how = "no scrolling" if not eq["scrolls"] else "no visible cue that it scrolls"
            problems.append(f"{name}: {eq['hidden']} px cut off, with {how}")
        elif eq["hidden"] > 2 and width >= LAPTOP:
            problems.append(f"{name}: {eq['width']} px wide, {eq['hidden']} px past the laptop column (break it)")
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_display_equations_fit_or_scroll_visibly(page):
    """After the page's axe runs (their loads): on a laptop every display formula fits the column; at any width
    its number never covers it, and a formula wider than a phone's column scrolls in its own box with a visible
    cue. The message names each formula by number, id and section, with the px (for the chapter's author)."""
    problems = [f"{mode} {width} px: {p}" for (mode, width), seen in _measured(page).items() if mode == MODES[0]
                for p in equation_problems(seen["equations"], width)]
    assert problems == [], f"{page}: {len(problems)} display formulas cut or covered:\n  " + "\n  ".join(problems)


def figure_problems(figures: list[dict]) -> list[str]:
    """Figures whose smallest text shows under LEGIBLE_TEXT_PX, and figures shown narrower than drawn that do not
    say a click enlarges them."""
    problems = []
    for figure in figures:
        where = f"figure in \"{figure['section']}\" ({figure['alt'][:60]}...)"
        if figure["shownPx"] < LEGIBLE_TEXT_PX:
            own = f" (drawn at {figure['ownPx']:g} px, shown {figure['width']} px wide)" if figure["ownPx"] else ""
            problems.append(f"{where}: smallest text {figure['shownPx']:.1f} px{own}")
        if figure["ownPx"] and not figure["explorer"] and figure["shownPx"] < figure["ownPx"] - 0.5 \
                and not figure["enlarges"]:
            problems.append(f"{where}: shown smaller than drawn, without 'click to enlarge'")
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_figure_text_is_legible_in_the_column(page):
    """After the page's axe runs: in the laptop column, every figure's smallest text (its own size, stored with the
    figure, times the scale the page shows it at; an SVG chart's text measured) is at least 9 px as displayed, and
    a figure shown smaller than drawn says that a click enlarges it. The message names each figure and its px."""
    seen = _measured(page)[(MODES[0], LAPTOP)]
    problems = figure_problems(seen["figures"])
    unmeasured = seen.get("unmeasured", [])
    assert unmeasured == [], f"{page}: figures without their text size (attnlib-text-px; re-execute): {unmeasured}"
    assert problems == [], f"{page}: {len(problems)} figures too small to read:\n  " + "\n  ".join(problems)


# --- reflow at 320 px (on the phone's load) -------------------------------------------------------------

OVERFLOW = bu.OVERFLOW
NARROWEST = 320  # WCAG 1.4.10 reflow: content fits 320 CSS px without scrolling in two directions
PHONE_WIDTH = min(WIDTHS)


def narrowed(driver, width: int) -> None:
    """Set the window's width and wait until the page has laid itself out again (a11y.js redoes its marks on
    ``resize``, as the theme's CSS does)."""
    driver.set_window_size(width, 900)
    driver.execute_async_script(SETTLED)
    driver.execute_script("window.attnlibA11y && window.attnlibA11y.fixAll();")
    driver.execute_async_script(SETTLED)


@pytest.mark.parametrize("page", PAGES)
def test_no_horizontal_scroll_at_320px(page, browsers, server):
    """No page is wider than a 320 px window (code blocks may scroll inside themselves, the page may not), and no
    explorer control is squeezed below a usable width. Measured on the page axe read at 390 px, its window narrowed
    to 320 px and widened again (a reader turning or resizing does the same; the layout follows the width, not the
    load), so the phone's taps below take the page as a reader first sees it."""
    driver = browsers(PHONE_WIDTH)
    assert open_page(driver, server, page, reuse=True)
    try:
        narrowed(driver, NARROWEST)
        result, window = driver.execute_script(OVERFLOW), driver.execute_script("return window.innerWidth")
    finally:
        narrowed(driver, PHONE_WIDTH)
    assert window == NARROWEST, f"the window did not narrow to {NARROWEST} px: {window}"
    assert result["scrollWidth"] <= result["width"], f"{page} at 320 px is {result['scrollWidth']} px wide: {result}"
    assert result["narrow"] == [], f"{page} at 320 px: explorer controls too narrow to use ({result['narrow']} px)"


TAP = """
const el = Array.from(document.querySelectorAll(arguments[0])).find(e => {
  const r = e.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
});
if (!el) { return null; }
el.scrollIntoView({block: 'nearest'});
const r = el.getBoundingClientRect();
return {x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height};
"""
DRAWER = """
const dialog = document.querySelector(arguments[0]);
if (!dialog || !dialog.open) { return null; }
const r = dialog.getBoundingClientRect();
const links = Array.from(dialog.querySelectorAll('a[href]')).filter(a => {
  const b = a.getBoundingClientRect(); return b.width > 0 && b.height > 0 && b.top < window.innerHeight && b.right > 0;
});
return {width: r.width, links: links.length, text: links.slice(0, 3).map(a => a.textContent.trim())};
"""
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}


def tap(driver, selector: str) -> dict | None:
    """Tap the first visible element matching ``selector`` with a touch gesture (DevTools); its box, or None."""
    box = driver.execute_script(TAP, selector)
    if box:
        for kind, points in (("touchStart", [{"x": box["x"], "y": box["y"]}]), ("touchEnd", [])):
            driver.execute_cdp_cmd("Input.dispatchTouchEvent", {"type": kind, "touchPoints": points})
        time.sleep(0.4)  # the dialog's opening
    return box


@pytest.mark.parametrize("page", PAGES)
def test_phone_reader_opens_the_chapter_list_and_page_contents_by_tapping(page, browsers, server):
    """On a 390 px phone (DevTools device emulation, touch), tapping ☰ opens the chapter list and tapping the
    contents button opens the page's outline, as drawers with visible links; both buttons are 44 px targets.
    (The page axe read at 390 px, taken as it is; a phone's viewport is emulated for the taps, then restored.)"""
    driver = browsers(390)
    assert open_page(driver, server, page, reuse=True)
    touched(driver)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
    driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415
    try:
        opened = {}
        for name, button, dialog in (("chapter list", ".primary-toggle", "#pst-primary-sidebar-modal"),
                                     ("page contents", ".secondary-toggle", "#pst-secondary-sidebar-modal")):
            box = tap(driver, button)
            if box is None and name == "page contents" and "secondary-toggle" not in (SITE / page).read_text(
                    encoding="utf-8"):
                continue  # a page without an outline has no contents button
            assert box, f"{page}: no visible {button} to tap at 390 px"
            assert min(box["w"], box["h"]) >= 44 - 0.5, (f"{page}: the {name} button is {box['w']:.0f} x "
                                                         f"{box['h']:.0f} px (44 x 44 for a finger)")
            opened[name] = driver.execute_script(DRAWER, dialog)
            _press(driver, Keys.ESCAPE)
            time.sleep(0.2)
        failed = {name: state for name, state in opened.items() if not state or state["links"] == 0}
        assert opened and not failed, f"{page}: tapping opened no drawer with links for {sorted(failed)}: {opened}"
    finally:
        driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": False})
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.parametrize("page", PAGES)
def test_laptop_header_has_one_search_box_and_the_menu_collapses_the_sidebar(page, browsers, server):
    """At 1280 px: one search field (two were shown: the theme's header band above the sidebar's), and ☰ hides the
    chapter list so the text column can widen, and shows it again (as the page was: the explorers' test takes it)."""
    seen = _measured(page)[(MODES[0], LAPTOP)]["navigation"]
    assert seen["search-button-field"]["shown"] == 1, f"{page}: {seen['search-button-field']} search fields"
    assert seen["primary-toggle"]["count"] == 1, f"{page}: {seen['primary-toggle']['count']} ☰ buttons in the page"
    driver = browsers(LAPTOP)
    assert open_page(driver, server, page, reuse=True)
    visible = "return document.querySelector('#pst-primary-sidebar').getBoundingClientRect().width"
    before = driver.execute_script(visible)
    driver.execute_script("document.querySelector('.primary-toggle').click()")
    time.sleep(0.3)
    after = driver.execute_script(visible)
    driver.execute_script("document.querySelector('.primary-toggle').click(); document.activeElement.blur();")
    time.sleep(0.3)
    again = driver.execute_script(visible)
    if abs(again - before) > 0.5:
        touched(driver)  # not as a reader first sees it: the next test loads it afresh
    assert before > 100 and after < 1, f"{page}: ☰ left the sidebar {before:.0f} -> {after:.0f} px wide"
    assert abs(again - before) <= 0.5, f"{page}: a second ☰ left the sidebar {again:.0f} px wide, not {before:.0f}"


@functools.cache
def _newest_shared_file() -> float:
    """When the newest of the site's shared files (theme, scripts, styles under ``_static/``) was written."""
    return max((f.stat().st_mtime for f in (SITE / "_static").rglob("*") if f.is_file()), default=0.0)


@pytest.mark.parametrize("page", PAGES)
def test_every_state_of_the_page_has_its_screenshot(page):
    """After a page's axe runs: a half-scale JPEG for each mode and width, as the reader sees it (half the window's
    width; the whole page, up to the cap, in WHOLE_PAGE_STATES, else the first screen), and its problem list, both
    taken of the site as it is built now (newer than the page and than every shared file it loads)."""
    from PIL import Image  # noqa: PLC0415 - matplotlib's dependency; only this test reads images

    built = max((SITE / page).stat().st_mtime, _newest_shared_file())
    for mode in MODES:
        for width in WIDTHS:
            shot = SCREENSHOTS / f"{_shot_name(page, f'{mode}-{width}')}.jpg"
            assert shot.is_file(), f"{page} ({mode}, {width} px): no screenshot at {shot}"
            for taken in (shot, shot.with_suffix(".json")):
                assert taken.stat().st_mtime >= built, f"{taken} is older than the site it should show: stale"
            with Image.open(shot) as image:
                assert image.format == "JPEG", (shot, image.format)
                assert image.width == width // 2 and image.height > 100, (shot, image.size)
            assert json.loads(shot.with_suffix(".json").read_text(encoding="utf-8")) == [], shot


# --- figures' text alternatives --------------------------------------------------------------------------


class Images(HTMLParser):
    """Every <img> of a page, including those inside saved widget states (explorer views)."""

    def __init__(self):
        super().__init__()
        self.images: list[dict] = []
        self._state = False
        self.states: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs)
        if tag == "svg" and attrs.get("role") == "img":  # an inline SVG figure (explorer states)
            self.images.append({**attrs, "alt": attrs.get("aria-label"), "src": "inline-svg"})
        if tag == "script" and attrs.get("type") == "application/vnd.jupyter.widget-state+json":
            self._state = True
            self.states.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._state = False

    def handle_data(self, data):
        if self._state:
            self.states[-1] += data


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def page_images(page: str) -> list[dict]:
    """The attributes of every image on ``page``: its own and those of every explorer state."""
    parser = Images()
    parser.feed((SITE / page).read_text(encoding="utf-8"))
    images = list(parser.images)
    for state in parser.states:
        for text in _strings(json.loads(state)):
            if "<img" in text:
                inner = Images()
                inner.feed(text)
                images += inner.images
    return images


PATH_LIKE = re.compile(r"(^|/)[^\s/]+\.(png|jpe?g|svg|gif)$|^[0-9a-f]{16,}|^_?(build|images|static)/|^\.\./", re.I)


def bad_alt(image: dict) -> str | None:
    """Why an image's alt text says nothing (a path, a generic word, missing), or None when it describes."""
    if image.get("role") == "presentation" or image.get("aria-hidden") == "true":
        return None
    alt = image.get("alt")
    if alt is None:
        return "no alt attribute"
    if alt.strip().lower() in GENERIC_ALT:
        return f"generic alt {alt!r}"
    if PATH_LIKE.search(alt.strip()):
        return f"path-like alt {alt!r}"
    return None


@pytest.mark.parametrize("page", PAGES)
def test_figures_have_descriptive_alt_text(page):
    _require_site()
    images = [i for i in page_images(page) if "logo" not in (i.get("class") or "")]
    bad = [(reason, (i.get("src") or "")[:60]) for i in images if (reason := bad_alt(i))]
    assert bad == [], f"{page}: {len(bad)} of {len(images)} images without a describing alt text: {bad[:5]}"


def _stored_message(image: dict) -> str | None:
    """The message a figure was drawn with (``attnlib.views.alt_text.say``): from its PNG's ``attnlib-message``
    chunk (a file of the site or a data URI), or from an explorer state's ``data-attnlib-message`` attribute."""
    from attnlib.views import images as figure_images  # noqa: PLC0415 - the library side, only this test

    src = image.get("src", "")
    if src.startswith("data:image/png;base64,"):
        png = base64.b64decode(src.split(",", 1)[1])
    elif src.endswith(".png"):
        files = [p for p in (SITE / "book" / src, SITE / src) if p.is_file()]
        png = files[0].read_bytes() if files else b""
    else:
        return image.get(figure_images.MESSAGE_ATTRIBUTE)
    return figure_images.png_text(png).get(figure_images.MESSAGE_KEY) if png else None


def test_chapter_figures_lead_with_their_message():
    """Every figure of a chapter (and of the background page), explorer states included, has an alt text that
    begins with its author's one-sentence message, followed by a description of its content."""
    from attnlib.views.alt_text import check_message  # noqa: PLC0415

    _require_site()
    chapters = [p for p in PAGES if re.match(r"book/(0\d_|background)", p)]
    assert chapters, PAGES
    words = re.compile(r"heatmap|colour grid|against|rises|falls|varies|bars|points|Figure")
    for page in chapters:
        figures = [i for i in page_images(page) if "_static/" not in i.get("src", "")
                   and (i.get("src", "").endswith(".png") or i.get("src", "").startswith(("data:image/png",
                                                                                          "inline-svg")))]
        assert figures, f"{page}: no figure at all"
        for image in figures:
            alt, message = image.get("alt") or "", _stored_message(image)
            assert message, f"{page}: a figure without a message (say(fig, ...) where it is drawn): {alt[:100]}"
            assert check_message(message) == message
            assert alt.startswith(message + " "), f"{page}: the alt does not begin with the message: {alt[:200]}"
            assert words.search(alt[len(message):]), f"{page}: no description after the message: {alt[:200]}"


# --- keyboard ---------------------------------------------------------------------------------------------

FOCUSED_OF = """function (e) {
const explorer = e && e.closest('.attnlib-explorer');
if (!explorer) { return null; }
const explorers = Array.from(document.querySelectorAll('.attnlib-explorer'));
const controls = Array.from(explorer.querySelectorAll('.noUi-handle, select'));
if (controls.indexOf(e) < 0) { return null; }
return {explorer: explorers.indexOf(explorer), control: controls.indexOf(e), tag: e.tagName,
        name: e.getAttribute('aria-labelledby') ? document.getElementById(e.getAttribute('aria-labelledby')).textContent
              : (e.labels && e.labels.length ? e.labels[0].textContent : e.getAttribute('aria-label')),
        valuetext: e.getAttribute('aria-valuetext'), value: e.tagName === 'SELECT' ? e.value : null};
}"""  # the explorer control ``e`` (or null)
FOCUSED = f"return ({FOCUSED_OF})(document.activeElement);"
# every explorer control that receives focus, logged as it happens (so Tab can be pressed in batches)
LOG_FOCUS = f"""
window.attnlibFocusLog = [];
if (!window.attnlibFocusHook) {{
  window.attnlibFocusHook = true;
  const focused = {FOCUSED_OF};
  document.addEventListener('focusin', e => {{
    const f = focused(e.target);
    if (f) {{ window.attnlibFocusLog.push(f); }}
  }}, true);
}}
"""

SHOWN = """
const explorer = document.querySelectorAll('.attnlib-explorer')[arguments[0]];
const state = Array.from(explorer.querySelectorAll('.attnlib-state')).find(s => s.offsetParent !== null);
const live = explorer.querySelector('.attnlib-live');
return {settings: state ? state.dataset.settings : null, live: live ? live.textContent : null};
"""
CONTROLS = """
return Array.from(document.querySelectorAll('.attnlib-explorer')).map(
  x => x.querySelectorAll('.noUi-handle, select').length);
"""


def _tab_through(driver, max_tabs: int = 800, batch: int = 25) -> list[dict]:
    """Press Tab from the top of the page until every explorer control was reached; those reached, in order.

    The page logs each control as it receives focus (``LOG_FOCUS``), so Tab is pressed ``batch`` times per
    round trip to the browser instead of once: every focus still counts, none is read from a single moment."""
    from selenium.webdriver.common.action_chains import ActionChains  # noqa: PLC0415
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    driver.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);")
    driver.execute_script(LOG_FOCUS)
    wanted = sum(driver.execute_script(CONTROLS))
    reached, seen = [], set()
    for _ in range(0, max_tabs, batch):
        ActionChains(driver).send_keys(Keys.TAB * batch).perform()
        for focus in driver.execute_script("return window.attnlibFocusLog.splice(0);"):
            if (focus["explorer"], focus["control"]) not in seen:
                seen.add((focus["explorer"], focus["control"]))
                reached.append(focus)
        if len(reached) == wanted:
            break
    return reached


def _press(driver, key) -> None:
    from selenium.webdriver.common.action_chains import ActionChains  # noqa: PLC0415

    ActionChains(driver).send_keys(key).perform()


def _wait_change(driver, script, args, before, timeout_s=5.0):
    deadline, now = time.monotonic() + timeout_s, driver.execute_script(script, *args)
    while now == before and time.monotonic() < deadline:
        time.sleep(0.1)
        now = driver.execute_script(script, *args)
    return now


def _check_control(driver, focus: dict) -> None:
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    assert focus["name"] and not re.search(r"\w_\w", focus["name"]), f"control without a worded name: {focus}"
    before = driver.execute_script(SHOWN, focus["explorer"])
    key = Keys.ARROW_DOWN if focus["tag"] == "SELECT" else Keys.ARROW_RIGHT
    _press(driver, key)
    after = _wait_change(driver, SHOWN, [focus["explorer"]], before)
    if after == before:  # the last option: go the other way
        _press(driver, Keys.ARROW_UP if focus["tag"] == "SELECT" else Keys.ARROW_LEFT)
        _press(driver, Keys.ARROW_UP if focus["tag"] == "SELECT" else Keys.ARROW_LEFT)
        after = _wait_change(driver, SHOWN, [focus["explorer"]], before)
    assert after["settings"] != before["settings"], f"arrow keys on {focus} changed no shown state: {before}"
    deadline = time.monotonic() + 5
    while not (after["live"] and after["settings"] in after["live"]) and time.monotonic() < deadline:
        time.sleep(0.1)
        after = driver.execute_script(SHOWN, focus["explorer"])
    assert after["live"] and after["settings"] in after["live"], f"the change was not announced: {after}"
    now = driver.execute_script(FOCUSED)
    assert now and (now["explorer"], now["control"]) == (focus["explorer"], focus["control"]), "focus was lost"
    if focus["tag"] != "SELECT":
        assert now["valuetext"] and now["valuetext"] in after["settings"], (
            f"the slider's spoken value {now['valuetext']!r} is not the shown setting {after['settings']!r}")


EXPLORER_PAGES = [p for p in PAGES if "attnlib-explorer" in (SITE / p).read_text(encoding="utf-8", errors="replace")]


@pytest.mark.parametrize("page", EXPLORER_PAGES)
def test_explorers_work_by_keyboard(page, browsers, server):
    """Every explorer control is reached with Tab, named in words and changed with the arrow keys; the state shown
    changes (the precomputed views are switched by the page's own JavaScript: no kernel), is announced and keeps the
    focus, without a console error; axe-core and the visual check then read the explorers in their new states."""
    driver = browsers(1280)
    assert open_page(driver, server, page, reuse=True)  # the page axe read at 1280 px, back in light mode
    touched(driver)
    counts = driver.execute_script(CONTROLS)
    editable = driver.execute_script("return Array.from(document.querySelectorAll('.attnlib-explorer .widget-readout'))"
                                     ".filter(r => r.isContentEditable || r.tabIndex >= 0).length")
    assert editable == 0, f"{page}: {editable} slider readouts take typed text that no kernel would apply"
    bu.console_errors(driver)  # what the load logged (test_site checks it): from here on, what the controls log
    reached = _tab_through(driver)
    assert len(reached) == sum(counts) > 0, f"{page}: Tab reached {len(reached)} of {sum(counts)} controls"
    for focus in reached:
        driver.execute_script("arguments[0].focus()", driver.execute_script(
            "return document.querySelectorAll('.attnlib-explorer')[arguments[0]]"
            ".querySelectorAll('.noUi-handle, select')[arguments[1]]", focus["explorer"], focus["control"]))
        _check_control(driver, focus)
    assert bu.console_errors(driver) == [], f"{page}: moving the explorers' controls logged errors"
    # the explorers now show states other than their first; the rest of the page is as test_axe read it in
    # light mode at 1280 px, so axe reads what the keys changed: the explorers (controls already asserted above)
    wcag = bu.wcag_violations(driver, parts=[".attnlib-explorer"])
    assert wcag == [], f"{page} after its explorers moved: {len(wcag)} WCAG violations\n{bu.describe_violations(wcag)}"
    problems = look_at(driver, page, "light-1280-explorers-moved")
    assert problems == [], (f"{page} after its explorers moved: {len(problems)} visual problems: "
                            f"{describe_problems(problems)}")


HEAD_SWITCHES = """
const root = document.querySelector('[id^="attnlib-head-"]');
return Array.from(root.querySelectorAll('[role="switch"]')).map(s => s.getAttribute('aria-checked'));
"""
FOCUS_INFO = """
const e = document.activeElement;
return {role: e.getAttribute('role'), label: e.getAttribute('aria-label'),
        view: (e.closest('[id^="attnlib-"]') || {}).id || null};
"""
VISIBLE_LINES = """
const root = document.querySelector('[id^="attnlib-head-"]');
return Array.from(root.querySelectorAll('svg line'))
  .filter(l => parseFloat(l.getAttribute('stroke-opacity')) > 0).length;
"""

BERTVIZ_PAGES = [p for p in PAGES if 'id="attnlib-head-' in (SITE / p).read_text(encoding="utf-8")]


def _tab_to(driver, role: str, max_tabs: int = 800) -> dict:
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    driver.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);")
    for _ in range(max_tabs):
        _press(driver, Keys.TAB)
        info = driver.execute_script(FOCUS_INFO)
        if info["role"] == role:
            return info
    return {}


@pytest.mark.parametrize("page", BERTVIZ_PAGES)
def test_bertviz_head_view_by_keyboard(page, browsers, server):
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    driver = browsers(1280)
    assert open_page(driver, server, page, reuse=True)
    touched(driver)
    info = _tab_to(driver, "switch")
    assert info.get("label", "").startswith("head "), f"{page}: Tab reached no head toggle: {info}"
    before, lines = driver.execute_script(HEAD_SWITCHES), driver.execute_script(VISIBLE_LINES)
    _press(driver, Keys.ARROW_RIGHT)
    moved = driver.execute_script(FOCUS_INFO)
    assert moved["role"] == "switch" and moved["label"] != info["label"], f"→ did not move to the next head: {moved}"
    _press(driver, Keys.SPACE)
    after = driver.execute_script(HEAD_SWITCHES)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [int(moved["label"].split()[1])], f"Space toggled {changed}, expected {moved['label']}"
    assert driver.execute_script(VISIBLE_LINES) != lines, "toggling a head changed no attention line"


MODEL_DETAIL = "return document.querySelectorAll('[id^=\"attnlib-model-\"] .detail').length;"


@pytest.mark.parametrize("page", [p for p in BERTVIZ_PAGES
                                  if 'id="attnlib-model-' in (SITE / p).read_text(encoding="utf-8")])
def test_bertviz_model_view_by_keyboard_and_fits(page, browsers, server):
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    for width in WIDTHS:  # the fit is only measured: the pages axe read serve, unless a test changed them
        driver = browsers(width)
        assert open_page(driver, server, page, reuse=True)
        fit = driver.execute_script(
            "const v = document.querySelector('[id^=\"attnlib-model-\"]'); const s = v.querySelector('svg');"
            "return [s.getBoundingClientRect().right, v.parentElement.getBoundingClientRect().right];")
        assert fit[0] <= fit[1] + 1, (f"{page} at {width} px: the model view ({fit[0]:.0f}) overflows "
                                      f"its column ({fit[1]:.0f})")
    touched(driver)  # the keys below change the page at the last width
    info = _tab_to(driver, "button")
    for _ in range(400):
        if not info or (info.get("view") or "").startswith("attnlib-model-"):
            break
        _press(driver, Keys.TAB)
        info = driver.execute_script(FOCUS_INFO)
    assert info and info["label"].startswith("layer 0, head 0"), f"{page}: Tab reached no thumbnail: {info}"
    _press(driver, Keys.ARROW_DOWN)
    moved = driver.execute_script(FOCUS_INFO)
    assert moved["label"].startswith("layer 1, head 0"), f"↓ did not move to the next layer: {moved}"
    _press(driver, Keys.ENTER)
    assert driver.execute_script(MODEL_DETAIL) > 0, "Enter did not enlarge the head"
    wcag = bu.wcag_violations(driver, parts=['[id^="attnlib-model-"]'])  # what Enter changed; the rest: test_axe
    assert wcag == [], f"{page} with a head enlarged: {len(wcag)} WCAG violations\n{bu.describe_violations(wcag)}"
    problems = look_at(driver, page, f"light-{width}-head-enlarged")
    assert problems == [], (f"{page} with a head enlarged: {len(problems)} visual problems: "
                            f"{describe_problems(problems)}")
    _press(driver, Keys.ESCAPE)
    assert driver.execute_script(MODEL_DETAIL) == 0, "Escape did not close the enlarged head"
    assert driver.execute_script(FOCUS_INFO)["label"].startswith("layer 1, head 0"), "Escape lost the focus"
    _press(driver, Keys.ENTER)
    assert driver.execute_script(MODEL_DETAIL) > 0, "Enter did not enlarge the head again"
    _press(driver, Keys.ENTER)
    assert driver.execute_script(MODEL_DETAIL) == 0, "a second Enter did not close it"
