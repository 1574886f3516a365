"""The built website in a real browser: every page of the table of contents, offline.

Reads the already built ``_build/html`` (``make book`` writes it), serves it on 127.0.0.1 and opens
every page listed by ``_toc.yml`` in headless Chromium. For each page: no console error, no request
to any host but loopback (every request is read from the DevTools performance log), the widgets'
saved state renders as ipywidgets DOM (that each control switches the state shown, with no kernel, is
test_accessibility.py's explorers test), the math arrives typeset (the build ran MathJax: the page loads none) and
draws in MathJax's fonts from the site itself, and every
BertViz view draws its SVG. (The screenshots of every page and state are
taken by test_accessibility.py, which loads each page with classic scrollbars, light and dark, at two widths.)

``ATTNLIB_BOOK_ROOT`` (a folder with ``_toc.yml``) and ``ATTNLIB_SITE_HTML`` (its built HTML) point
the tests at another build, e.g. one made with ``jupyter-book build --path-output``.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from attnlib.views import html as views_html
from attnsite import site_assets as assets
from tests import browser_utils as bu

pytestmark = pytest.mark.browser

BOOK_ROOT = Path(os.environ.get("ATTNLIB_BOOK_ROOT", bu.REPO))
SITE = Path(os.environ.get("ATTNLIB_SITE_HTML", BOOK_ROOT / "_build" / "html"))
WINDOW_WIDTH = 1280

# Content that known chapters must have, checked once the chapter is in the table of contents.
MUST_HAVE = [
    (re.compile(r"^book/0[1-9]_"), "widgets"),
    (re.compile(r"^book/(intro|0[1-9]_.*)$"), "math"),
    (re.compile(r"^book/0[56]_"), "head view"),
    (re.compile(r"^book/06_real_model$"), "model view"),
]


def _toc_files(node) -> list[str]:
    if isinstance(node, list):
        return [f for item in node for f in _toc_files(item)]
    if isinstance(node, dict):
        own = [node["file"]] if "file" in node else []
        return own + [f for key, value in node.items() if key != "file" for f in _toc_files(value)]
    return []


def toc_pages(root: Path = BOOK_ROOT) -> list[str]:
    """Every page of ``_toc.yml`` (root first), as paths without suffix: ['book/intro', ...]."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"], *_toc_files({k: v for k, v in toc.items() if k != "root"})]
    pages = [re.sub(r"\.(md|ipynb)$", "", f) for f in files]
    return list(dict.fromkeys(pages))


PAGES = toc_pages()


def required(page: str) -> list[str]:
    """What ``page`` must contain (from MUST_HAVE)."""
    return [what for pattern, what in MUST_HAVE if pattern.search(page)]


# --- visiting a page ---------------------------------------------------------------------------------

PROBE = """
const all = (s, root) => Array.from((root || document).querySelectorAll(s));
const views = all('script[type="application/vnd.jupyter.widget-view+json"]').length;
const subareas = all('.widget-subarea');
const widgetClasses = new Set();
subareas.forEach(s => all('*', s).forEach(e => e.classList.forEach(c => {
  if (c.startsWith('widget-')) { widgetClasses.add(c); }
})));
const maths = all('.bd-article .math');
const visible = l => parseFloat(l.getAttribute('stroke-opacity') || '1') > 0;
const paramsOf = id => {
  for (const s of document.scripts) {
    const t = s.textContent, i = t.indexOf('const params = ');
    if (i >= 0 && t.includes(id)) { return t.slice(i + 'const params = '.length); }
  }
  return null;
};
const bertviz = all('[id^="attnlib-head-"], [id^="attnlib-model-"], div[id^="bertviz-"]').map(r => ({
  id: r.id,
  svgs: all('svg', r).length,
  lines: all('svg line', r).length,
  visibleLines: all('svg line', r).filter(visible).length,
  thumbnails: all('rect.attn_background', r).length,
  params: paramsOf(r.id),
}));
return {
  widgetViews: views,
  widgetSubareas: subareas.length,
  widgetsRendered: subareas.filter(s => s.querySelector('.jupyter-widgets')).length,
  widgetClasses: Array.from(widgetClasses).sort(),
  maths: maths.length,
  mathsTypeset: maths.filter(m => m.querySelector('mjx-container')).length,
  mathsSpoken: maths.filter(m => m.querySelector('mjx-container > mjx-assistive-mml > math')).length,
  mathsWithTex: maths.filter(m => m.dataset.tex && m.dataset.tex.trim()).length,
  mathErrors: all('mjx-merror, .attnlib-tex-error').map(e => e.textContent),
  mathJaxScript: 'MathJax' in window || all('script[src*="mathjax"]').length > 0,
  mathTabStops: all('mjx-container[tabindex]').filter(m => !m.classList.contains('attnlib-scrolls')).length,
  mathFonts: Array.from(document.fonts).filter(f => f.family.startsWith('MJX'))
    .map(f => f.family + ' ' + f.status).sort(),
  bertviz: bertviz,
  icons: all('svg.svg-inline--fa').length,
  iconsMissing: all('svg.svg-inline--fa.missing').map(e => e.getAttribute('data-icon')),
  iconsNotDrawn: all('i[class*="fa-"]').filter(e => !e.closest('.jupyter-widgets')).map(e => e.className),
};
"""


def _ready(probe: dict) -> bool:
    widgets = probe["widgetsRendered"] >= probe["widgetViews"]
    return widgets and all(view["svgs"] > 0 and view["lines"] > 0 for view in probe["bertviz"])


@dataclass
class Visit:
    """What one page did in the browser."""

    page: str
    probe: dict
    requests: list[bu.Request]
    console: list[str]
    seconds: float
    paint: dict | None = None  # SLOW_PAGE only: first paint, render-blocking scripts, the widgets' file (PAINT_TIMES)

    @property
    def transferred(self) -> int:
        return sum(r.transferred for r in self.requests)

    @property
    def size(self) -> int:
        return sum(r.size for r in self.requests)


def view_kind(view: dict) -> str:
    """'head view' or 'model view' for a BertViz root found by PROBE."""
    if view["id"].startswith("attnlib-model-") or view["thumbnails"] > 0:
        return "model view"
    return "head view"


def _wait_ready(driver, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    probe = driver.execute_script(PROBE)
    while not _ready(probe) and time.monotonic() < deadline:
        time.sleep(0.2)
        probe = driver.execute_script(PROBE)
    return probe


# The page whose visit is made over a slow network (DevTools throttling), and what it may take to first paint
SLOW_PAGE = "book/06_real_model"
SLOW_NETWORK = {"offline": False, "latency": 150, "downloadThroughput": 1_600_000 / 8,
                "uploadThroughput": 750_000 / 8}  # "Fast 3G": 1.6 Mbit/s down, 150 ms round trips
FIRST_PAINT_BUDGET_S = 4.0
PAINT_TIMES = """
const paint = performance.getEntriesByName('first-contentful-paint')[0];
const blocking = performance.getEntriesByType('resource')
  .filter(r => r.renderBlockingStatus === 'blocking' && r.initiatorType === 'script')
  .map(r => ({url: r.name, end: r.responseEnd / 1000, bytes: r.transferSize}));
const widgets = performance.getEntriesByType('resource').find(r => r.name.endsWith(arguments[0]));
return {firstPaint: paint ? paint.startTime / 1000 : null, blocking: blocking,
        widgetsLoaded: widgets ? widgets.responseEnd / 1000 : null};
"""


def visit(driver, base_url: str, page: str) -> Visit:
    """Open ``page`` (from the toc), wait for its widgets, BertViz and fonts, and record everything. ``SLOW_PAGE``
    is opened over ``SLOW_NETWORK`` and its paint times recorded (``Visit.paint``)."""
    bu.performance_messages(driver), bu.console_errors(driver)  # drop what the previous page logged
    slow = page == SLOW_PAGE
    if slow:
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", SLOW_NETWORK)
    start = time.monotonic()
    try:
        driver.get(f"{base_url}{page}.html")
        paint = driver.execute_script(PAINT_TIMES, assets.WIDGETS_JS) if slow else None
        _wait_ready(driver)
        messages = bu.wait_network_idle(driver, quiet_s=2.0 if slow else 0.75, timeout_s=90 if slow else 30)
        if slow:  # the first paint is long past; the widgets' file may have arrived only now
            paint = {**driver.execute_script(PAINT_TIMES, assets.WIDGETS_JS), "blocking": paint["blocking"]}
    finally:
        if slow:
            driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                                        "downloadThroughput": -1,
                                                                        "uploadThroughput": -1})
    probe = driver.execute_script(PROBE)  # after the network settled: the final state
    seconds = time.monotonic() - start
    return Visit(page, probe, bu.network_requests(messages), bu.console_errors(driver), seconds, paint)


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        pytest.fail(f"expected the built book in {SITE}, found no index.html: run `make book` first", pytrace=False)
    return SITE


@pytest.fixture(scope="module")
def browser(site):
    bu.require_chromium()
    with bu.serve(site) as base_url, bu.chromium(width=WINDOW_WIDTH) as driver:
        yield driver, base_url


@pytest.fixture(scope="module")
def visits(browser) -> dict[str, Visit]:
    """Pages visited so far in this module (each page is loaded once)."""
    return {}


@pytest.fixture
def page_visit(request, browser, visits, site) -> Visit:
    page = request.param
    if not (site / f"{page}.html").is_file():
        pytest.fail(f"expected {page}.html in {site} (it is in _toc.yml): the build is stale, run `make book`",
                    pytrace=False)
    if page not in visits:
        visits[page] = visit(*browser, page)
    return visits[page]


def by_page(test):
    """Parametrize ``test`` over every page of the toc (fixture ``page_visit``)."""
    return pytest.mark.parametrize("page_visit", PAGES, indirect=True, ids=PAGES)(test)


def pages_with(*what: str):
    """Parametrize a test over the toc pages that must have any of ``what`` (MUST_HAVE)."""
    pages = [p for p in PAGES if set(what) & set(required(p))]
    return pytest.mark.parametrize("page_visit", pages, indirect=True, ids=pages)


# --- every page --------------------------------------------------------------------------------------


def test_toc_lists_pages():
    assert PAGES[0] == yaml.safe_load((BOOK_ROOT / "_toc.yml").read_text(encoding="utf-8"))["root"]
    assert all((BOOK_ROOT / f"{p}.md").is_file() or (BOOK_ROOT / f"{p}.ipynb").is_file() for p in PAGES), PAGES


@by_page
def test_no_console_errors(page_visit):
    assert page_visit.console == [], f"{page_visit.page}: console errors {page_visit.console}"


@by_page
def test_requests_stay_on_loopback(page_visit):
    assert page_visit.requests, f"{page_visit.page}: no request logged at all (is the performance log on?)"
    outside = [r.url for r in page_visit.requests if not bu.is_loopback(r.url)]
    assert outside == [], f"{page_visit.page}: requests leaving loopback: {outside}"


@by_page
def test_every_request_succeeds(page_visit):
    failed = [(r.url, r.status, r.error) for r in page_visit.requests
              if r.error or (r.status is not None and r.status >= 400)]
    assert failed == [], f"{page_visit.page}: failed requests {failed}"


@pages_with("widgets")
def test_widgets_render(page_visit):
    probe = page_visit.probe
    assert probe["widgetViews"] > 0, f"{page_visit.page} must show at least one widget, has none"
    assert probe["widgetsRendered"] == probe["widgetViews"], probe
    assert probe["widgetClasses"], f"{page_visit.page}: no .widget-* element rendered: {probe}"


@pages_with("math")
def test_math_arrives_typeset_and_draws_in_the_site_s_own_fonts(page_visit):
    """Every formula is MathJax's output in the page as served (attnsite/typeset_math.py), with its MathML for
    screen readers and its TeX; the page runs no MathJax; a formula is a tab stop only where it scrolls (a11y.js);
    the fonts it draws in came from the site and loaded."""
    probe, page = page_visit.probe, page_visit.page
    assert probe["maths"] > 0, f"{page} must show math, has none"
    assert probe["mathsTypeset"] == probe["mathsSpoken"] == probe["mathsWithTex"] == probe["maths"], probe
    assert probe["mathErrors"] == [], f"{page}: TeX errors {probe['mathErrors']}"
    assert not probe["mathJaxScript"], f"{page} loads MathJax: the build typesets its formulas"
    assert probe["mathTabStops"] == 0, f"{page}: {probe['mathTabStops']} formulas are tab stops but do not scroll"
    fonts = [f for f in page_visit.requests if "/mathjax/output/chtml/fonts/" in urlsplit(f.url).path]
    assert fonts and all(urlsplit(f.url).path.lstrip("/").startswith(assets.VENDOR_DIR) for f in fonts), fonts
    used = [f for f in probe["mathFonts"] if f.endswith(" loaded")]  # a face no formula uses stays unloaded
    assert used and not [f for f in probe["mathFonts"] if f.endswith(" error")], probe["mathFonts"]


def _check_model_view(view: dict) -> None:
    params, _ = json.JSONDecoder().raw_decode(view["params"])
    attn = params["attention"][0]["attn"]  # (layers, heads, Lq, Lk) as nested lists
    layers, heads, lq, lk = len(attn), len(attn[0]), len(attn[0][0]), len(attn[0][0][0])
    assert view["thumbnails"] == layers * heads, f"expected {layers}x{heads} head thumbnails, got {view}"
    assert view["lines"] >= layers * heads * lq * lk, f"expected a line per weight of every head, got {view}"


@pages_with("head view", "model view")
def test_bertviz_views_draw_attention(page_visit):
    views = page_visit.probe["bertviz"]
    kinds = [view_kind(v) for v in views]
    for what in {"head view", "model view"} & set(required(page_visit.page)):
        assert what in kinds, f"{page_visit.page} must show a BertViz {what}, has {kinds}"
    for view, kind in zip(views, kinds, strict=True):
        assert view["svgs"] > 0 and view["visibleLines"] > 0, f"{kind} drew no attention lines: {view}"
        if kind == "model view":
            _check_model_view(view)


NEURON_ROOT = ("const r = document.querySelector('[id^=attnlib-neuron-]');"
               "return r && r.querySelector('svg text') ? r.id : null")


def test_chapter_6_neuron_view_draws_expands_and_scores_he(browser):
    """Chapter 6's neuron view on the built page: it draws, expands, and shows a score per key for the query
    'he', offline (attnlib.views.neuron's own tests read the view outside the site, tests/lib)."""
    from tests.lib.test_views_neuron import DISPLAYED, hover  # noqa: PLC0415 - the view's own probes

    driver, base_url = browser
    driver.get_log("browser"), driver.get_log("performance")
    driver.get(f"{base_url}book/06_real_model.html")
    deadline, root = time.monotonic() + 20, None
    while root is None and time.monotonic() < deadline:
        root = driver.execute_script(NEURON_ROOT) or time.sleep(0.1)
    assert root, "expected chapter 6's neuron view to draw its SVG"
    driver.execute_script(f"document.querySelector('#{root} .attnlib-expand').click()")
    tokens = driver.execute_script(f"return Array.from(document.querySelectorAll('#{root} #expanded #leftText > g'))"
                                   ".map(g => g.querySelector('text').textContent)")
    hover(driver, root, "#expanded", tokens.index("he"))
    shown = driver.execute_script(DISPLAYED, root)
    assert len(shown) == len(tokens) and all(v is not None for v in shown), shown
    requests = bu.network_requests(bu.wait_network_idle(driver))
    assert [r.url for r in requests if not bu.is_loopback(r.url)] == []
    assert bu.console_errors(driver) == []


@by_page
def test_theme_icons_are_drawn(page_visit):
    """Every Font Awesome icon of the theme is drawn (the site ships only the icons it uses)."""
    probe = page_visit.probe
    assert probe["icons"] > 0, f"{page_visit.page}: no theme icon drawn at all"
    assert probe["iconsMissing"] == [] and probe["iconsNotDrawn"] == [], probe


@pytest.mark.parametrize("page_visit", [p for p in PAGES if p == SLOW_PAGE], indirect=True)
def test_first_paint_on_a_slow_network_does_not_wait_for_the_widgets(page_visit, capsys):
    """Over a 1.6 Mbit/s network (the DevTools protocol's throttling), the chapter paints its text before the
    widget manager (458 kB gzip) has arrived, and within FIRST_PAINT_BUDGET_S: no script blocks the first paint.
    The manager was a render-blocking script on every chapter (phones showed raw TeX for 8-9 s)."""
    paint = page_visit.paint
    assert paint and paint["firstPaint"] is not None, f"{page_visit.page}: no first paint recorded: {paint}"
    with capsys.disabled():
        print(f"\n{page_visit.page} over 1.6 Mbit/s: first paint at {paint['firstPaint']:.2f} s (budget "
              f"{FIRST_PAINT_BUDGET_S} s), the widget manager loaded at {paint['widgetsLoaded'] or 0:.2f} s; "
              f"render-blocking scripts: {[b['url'].rsplit('/', 1)[-1] for b in paint['blocking']]}")
    blocking = [b for b in paint["blocking"] if b["bytes"] > 20_000]
    assert blocking == [], f"{page_visit.page}: scripts over 20 kB block the first paint: {blocking}"
    assert paint["widgetsLoaded"] is None or paint["firstPaint"] < paint["widgetsLoaded"], paint
    assert paint["firstPaint"] < FIRST_PAINT_BUDGET_S, f"{page_visit.page}: first paint after {paint}"


# --- the whole book ----------------------------------------------------------------------------------


def test_heaviest_page_stays_under_budget(browser, visits, site, capsys):
    for page in PAGES:
        if page not in visits and (site / f"{page}.html").is_file():
            visits[page] = visit(*browser, page)
    rows = sorted(visits.values(), key=lambda v: bu.weight(v.requests)[0], reverse=True)
    with capsys.disabled():
        print(f"\nPage weight, transferred (budget {bu.PAGE_BUDGET_BYTES / 1e6:.1f} MB of its own on top of the shared "
              f"libraries, which stay under {bu.SHARED_BUDGET_BYTES / 1e6:.1f} MB):")
        for v in rows:
            own, shared = bu.weight(v.requests)
            print(f"  {v.page:32s} {own / 1e6:6.3f} MB own  {shared / 1e6:6.3f} MB shared  "
                  f"{v.transferred / 1e6:6.3f} MB in all  {len(v.requests):3d} requests  {v.seconds:5.1f} s")
    heaviest = rows[0]
    own = [r for r in heaviest.requests if not bu.is_shared(r.url)]
    assert bu.weight(heaviest.requests)[0] < bu.PAGE_BUDGET_BYTES, (
        f"{heaviest.page} adds {bu.weight(heaviest.requests)[0] / 1e6:.3f} MB of its own; largest parts: "
        f"{sorted(((r.transferred, r.url) for r in own), reverse=True)[:5]}")
    most_shared = max(rows, key=lambda v: bu.weight(v.requests)[1])
    shared = [r for r in most_shared.requests if bu.is_shared(r.url)]
    assert bu.weight(most_shared.requests)[1] < bu.SHARED_BUDGET_BYTES, (
        f"{most_shared.page} loads {bu.weight(most_shared.requests)[1] / 1e6:.3f} MB of shared libraries; largest: "
        f"{sorted(((r.transferred, r.url) for r in shared), reverse=True)[:5]}")


SEARCH_RESULTS = """
const summary = document.querySelector('#search-results .search-summary');
return {done: !!summary && !/Searching/.test(summary.textContent), results: Array.from(
  document.querySelectorAll('#search-results ul.search li')).map(li => ({
    title: (li.querySelector('a') || {}).textContent || '',
    snippet: (li.querySelector('p.context') || {}).textContent || ''}))};
"""
TEX_SOURCE = re.compile(r"\\(operatorname|frac|sqrt|begin|end|mathrm|text|left|right|top|cdot)\b|\\[()\[\]]")


def test_search_ranks_the_page_titled_by_the_word_first_and_its_snippets_read_as_prose(browser):
    """Searching "softmax" lists chapter 3, "Softmax", first (Sphinx ranks a word in any section title as high as
    in a page's title, and chapter 2 has "2.1 A preview of the softmax"); no snippet shows TeX source, the printed
    contents list or the launch buttons (the search page's patch, attnsite/static/search.js, must run between
    Sphinx's deferred search scripts)."""
    driver, base_url = browser
    driver.get(f"{base_url}search.html?q=softmax")
    deadline, found = time.monotonic() + 60, driver.execute_script(SEARCH_RESULTS)
    while not (found["done"] and all(r["snippet"] for r in found["results"])) and time.monotonic() < deadline:
        time.sleep(0.2)
        found = driver.execute_script(SEARCH_RESULTS)
    results = found["results"]
    assert found["done"] and len(results) >= 5, f"the search did not finish with results: {found}"
    assert results[0]["title"].startswith("3. Softmax"), [r["title"] for r in results]
    raw = [(r["title"], r["snippet"][:200]) for r in results if TEX_SOURCE.search(r["snippet"])
           or "Contents" in r["snippet"] or "Binder" in r["snippet"] or not r["snippet"].strip()]
    assert raw == [], f"snippets with TeX source, a contents list or buttons (or none): {raw}"
    assert bu.console_errors(driver) == []


def test_vendored_libraries_are_served(site):
    missing = [p for _, p in assets.site_files() if not (site / p).is_file()]
    assert missing == [], f"expected the vendored npm files in {site}, missing {missing[:5]}: run `make book`"


def test_no_built_page_carries_d3_or_jquery_inline(site):
    """The notebook's first BertViz view inlines both libraries; the build links the vendored copies instead."""
    pages = sorted(site.rglob("*.html"))
    sources = {name: views_html.library_source(name)[:4000] for name in views_html.LIBRARY_FILES}
    inline = [(p.name, name) for p in pages for name, src in sources.items() if src in p.read_text(encoding="utf-8")]
    assert inline == [], f"expected d3 and jQuery only as files under _static/_vendor/, found them inline in {inline}"
    chapter = (site / "book" / "06_real_model.html").read_text(encoding="utf-8")
    for name in ("d3", "jquery"):
        assert chapter.count(f'<script src="../{assets.site_url(name)}"></script>') == 1, name


GLUED = re.compile(r'<span class="pasted-(?:text|inline)">(.*?)</span>', re.S)
FLOAT_NOISE = re.compile(r"\d\.\d{7,}")  # more decimals than any claim in the prose shows (the most: .5f)


def test_numbers_glued_into_the_prose_show_the_precision_of_their_role(site):
    """A computed number in the prose is shown at the precision its role states (``{glue:text}`name:.1f```); a role
    without one prints the float whole, noise digits and all (the accessibility page read 'closer than
    27.696924367486012')."""
    noisy = {page: found for page in PAGES
             if (found := [g for g in GLUED.findall((site / f"{page}.html").read_text(encoding="utf-8"))
                           if FLOAT_NOISE.search(g)])}
    assert noisy == {}, f"glued numbers shown with all their digits (give the role a format, e.g. :.2f): {noisy}"


# --- the student edition's exercises ---------------------------------------------------------------------------

CELL_START = re.compile(r'<div class="cell(?: |")')


def _exercise_cells(page: str) -> dict[str, int]:
    """How many code cells of the chapter's notebook are nbgrader answer and test cells: {'answer': n, 'tests': n}."""
    notebook = json.loads((BOOK_ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
    counts = {"answer": 0, "tests": 0}
    for cell in notebook["cells"]:
        grading = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and (grading.get("solution") or grading.get("grade")):
            counts["answer" if grading.get("solution") else "tests"] += 1
    return counts


@pytest.mark.parametrize("page", [p for p in PAGES if re.match(r"book/\d\d_", p)])
def test_student_edition_shows_no_output_of_answer_or_test_cells(page, site):
    """The build executes the chapters with the reference answers; the student edition shows the stub a student
    gets, so what the answer and test cells printed ("Exercise 1.1: tests passed", the points) is the instructor's
    run and must not show under it. Every such cell is on the page (marked by its role) and has no output."""
    from attnsite.nbgrader_site import edition  # noqa: PLC0415 - the edition the site was built as

    html = (site / f"{page}.html").read_text(encoding="utf-8")
    cells = CELL_START.split(html)[1:]
    marked = {role: [c for c in cells if f"attnlib-exercise-{role}" in c.split(">", 1)[0]]
              for role in ("answer", "tests")}
    expected = _exercise_cells(page)
    assert {role: len(found) for role, found in marked.items()} == expected, (
        f"{page}: expected the notebook's {expected} answer and test cells on the page, marked by role")
    shown = [c[:300] for found in marked.values() for c in found if "cell_output" in c]
    if edition() == "instructor":  # the instructor edition keeps what its reference run printed
        assert len(shown) >= expected["tests"], f"{page}: the instructor edition lost its test cells' outputs"
        return
    assert shown == [], f"{page}: answer or test cells show the reference run's output: {shown}"
    assert "tests passed" not in html, f"{page}: the student edition says 'tests passed'"


EQUATION = re.compile(r'<div class="math[^"]*"[^>]* id="equation-([^"]+)">\s*<span class="eqno">\(([^)<]*)\)')
EQUATION_REFERENCE = re.compile(r'<a class="reference internal" href="([^"#]*)#equation-([^"]+)">\(([^)<]*)\)</a>')


def test_equations_are_numbered_per_page_and_every_reference_reads_the_same(site):
    """A chapter's display equations read (3.1), (3.2), ...; the background page's (B.1), the going-further pages'
    (G.1) and (P.1) (``attnsite.theme.chapter_label``), so no number is another page's; and every ``{eq}``
    reference, on its own page or another, reads the number printed beside the equation it links to."""
    from attnsite.theme import chapter_label  # noqa: PLC0415 - the build's rule for a page's prefix

    numbers, references = {}, []
    for page in PAGES:
        html = (site / f"{page}.html").read_text(encoding="utf-8")
        found = EQUATION.findall(html)
        label = chapter_label(page)
        expected = [f"{label}.{i}" if label else str(i) for i in range(1, len(found) + 1)]
        assert [number for _, number in found] == expected, f"{page}: equations numbered {found}"
        numbers.update({(page, key): number for key, number in found})
        folder = page.rsplit("/", 1)[0]
        references += [(page, f"{folder}/{href.removesuffix('.html')}" if href else page, key, number)
                       for href, key, number in EQUATION_REFERENCE.findall(html)]
    assert any(number.startswith("G.") for number in numbers.values()), "no equation of the going-further pages"
    assert len(references) > 50, f"only {len(references)} equation references found: has the markup changed?"
    wrong = [(page, target, key, number, numbers.get((target, key))) for page, target, key, number in references
             if numbers.get((target, key)) != number]
    assert wrong == [], f"references not reading their equation's number (page, target, id, read, printed): {wrong}"
