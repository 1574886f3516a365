"""The print edition: the built website, printed by Chromium, as one PDF (``make pdf``).

Why Chromium and not Jupyter Book's LaTeX builder: the chapters' explorers (ipywidgets) and BertViz
views are HTML and JavaScript, which LaTeX cannot draw (the LaTeX build drops them), and LaTeX needs
TeX Live (texlive-xetex and friends, several hundred MB from Debian). Chromium is already what the
browser tests use, and it prints exactly what a reader sees: the math (typeset by MathJax when the site was
built, in MathJax's fonts), every figure, each
explorer's initial state, the BertViz views scaled to the page (``a11y.css``'s print rules).

Each page of ``_toc.yml`` is opened from the built site (served on loopback), drawn completely (the math's
fonts, widgets, BertViz), prepared for its edition, and printed with the DevTools ``Page.printToPDF``; pypdf
joins the pages into one book with a bookmark per chapter.

* student edition (default): exercises without their solutions (nbgrader answer cells, which
  ``a11y.py`` marks ``attnlib-solution``, and the "Solution" dropdowns of written exercises);
* instructor edition (``--instructor``): every solution printed open.

In both, the quick checks (``attnsite/quiz.py``) print as questions, their answers and explanations gathered
under "Answers to the checks" at the end of each chapter.

Every other collapsed part (hidden code, test cells) is printed open. Usage:
``python -m attnsite.print_book [--instructor] [--site _build/html] [--out book.pdf]``.
"""

from __future__ import annotations

import argparse
import base64
import functools
import io
import re
import shutil
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from pypdf import PdfReader, PdfWriter

from .site_assets import REPO

# Headless Chromium that reaches nothing but this machine (the tests' browser takes the same: tests/browser_utils.py).
OFFLINE_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
                 "--disable-dev-shm-usage", "--hide-scrollbars",
                 # belt and braces: a name other than loopback never resolves (the log still records the attempt)
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1")
CHROME_FLAGS = (*OFFLINE_FLAGS, "--window-size=1000,1400")
A4 = {"paperWidth": 8.27, "paperHeight": 11.69, "marginTop": 0.6, "marginBottom": 0.6,
      "marginLeft": 0.55, "marginRight": 0.55}

READY = """
const done = arguments[arguments.length - 1];
const all = s => Array.from(document.querySelectorAll(s));
const deadline = Date.now() + 90000;
function drawn() {
  const views = all('script[type="application/vnd.jupyter.widget-view+json"]').length;
  const widgets = all('.widget-subarea').filter(s => s.querySelector('.jupyter-widgets')).length;
  const bertviz = all('[id^="attnlib-head-"], [id^="attnlib-model-"]').every(r => r.querySelector('svg line'));
  return widgets >= views && bertviz;
}
(function wait() {
  if (drawn() || Date.now() > deadline) {  // then every font the drawn page uses (the math's among them)
    setTimeout(() => document.fonts.ready.then(() => done(drawn()), () => done(false)), 500);
  } else { setTimeout(wait, 100); }
})();
"""

# Prepare a page for print: open what is collapsed, and for students remove the solutions.
PREPARE = """
const instructor = arguments[0];
const all = s => Array.from(document.querySelectorAll(s));
const isSolution = e => /^\\s*solution/i.test((e.querySelector('.admonition-title, summary') || {}).textContent || '');
let removed = 0;
if (!instructor) {
  all('.attnlib-solution').forEach(e => { e.remove(); removed++; });
  all('.admonition, details.dropdown, details').filter(isSolution).forEach(e => { e.remove(); removed++; });
}
// the quick checks' answers under "Answers to the checks" at the end of the chapter (attnsite/static/quiz.js)
if (window.attnlibQuiz) { window.attnlibQuiz.answersAtEnd(); }
all('details').forEach(d => { d.open = true; });
all('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
all('.admonition.toggle, .toggle').forEach(e => e.classList.add('toggle-shown'));
all('.toggle-button').forEach(b => b.remove());
all('details.attnlib-view-text').forEach(d => { d.open = false; });
return removed;
"""

# After print media is on: code that would be cut off (wider than its box, not wrapped), and views wider
# than the printed column.
CUT_OFF = """
const article = document.querySelector('.bd-article');
const right = article ? article.getBoundingClientRect().right + 1 : window.innerWidth;
const code = Array.from(document.querySelectorAll('.bd-article pre')).filter(p => p.scrollWidth > p.clientWidth + 2)
  .map(p => p.textContent.slice(0, 60));
const views = Array.from(document.querySelectorAll('.bd-article svg, .bd-article img'))
  .filter(e => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().right > right)
  .map(e => (e.closest('[id]') || e).id || e.tagName);
return code.concat(views);
"""


def toc_pages(root: Path = REPO) -> list[str]:
    """The pages of ``_toc.yml`` in reading order, as site paths ('book/intro.html', ...)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            if "file" in node and node is not toc:
                files.append(node["file"])
            for key, value in node.items():
                if key not in ("file", "root"):
                    walk(value)

    walk(toc)
    return [re.sub(r"\.(md|ipynb)$", "", f) + ".html" for f in dict.fromkeys(files)]


@contextmanager
def serve(directory: Path, handler_class: type[SimpleHTTPRequestHandler] | None = None):
    """The built site on 127.0.0.1 (a free port), in a thread; yields its base URL ending in '/'.
    ``handler_class`` answers the requests (default: plain static files, nothing logged)."""
    handler = functools.partial(handler_class or _Quiet, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        pass


@contextmanager
def chromium():
    """Headless Debian Chromium through Selenium (Selenium Manager cannot download one here)."""
    from selenium import webdriver  # noqa: PLC0415
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    profile = tempfile.mkdtemp(prefix="attnlib-print-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in (*CHROME_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=options)
    try:
        driver.set_script_timeout(180)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def print_page(driver, url: str, instructor: bool) -> tuple[bytes, dict]:
    """One page as PDF bytes, and what was done to it: {'title', 'removed', 'cut_off', 'ready'}."""
    driver.get(url)
    ready = driver.execute_async_script(READY)
    removed = driver.execute_script(PREPARE, instructor)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    time.sleep(0.3)
    cut_off = driver.execute_script(CUT_OFF)
    title = driver.execute_script("const h = document.querySelector('.bd-article h1');"
                                  "return h ? h.textContent.replace('#', '').trim() : document.title;")
    pdf = driver.execute_cdp_cmd("Page.printToPDF", {**A4, "printBackground": True, "preferCSSPageSize": False})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    return base64.b64decode(pdf["data"]), {"title": title, "removed": removed, "cut_off": cut_off, "ready": ready}


def print_book(site: Path, out: Path, instructor: bool = False, pages: list[str] | None = None) -> list[dict]:
    """Print every toc page of the built ``site`` into one PDF at ``out``; returns per page what happened."""
    pages = toc_pages() if pages is None else pages
    missing = [p for p in pages if not (site / p).is_file()]
    if missing:
        raise FileNotFoundError(f"expected the built site in {site} (run `make book`), missing {missing}")
    writer, report = PdfWriter(), []
    with serve(site) as base, chromium() as driver:
        for page in pages:
            data, info = print_page(driver, base + page, instructor)
            first = len(writer.pages)
            writer.append(PdfReader(io.BytesIO(data)))
            writer.add_outline_item(title=info["title"], page_number=first)
            report.append({"page": page, "first_page": first, "pages": len(writer.pages) - first, **info})
    edition = "instructors' edition" if instructor else "student edition"
    writer.add_metadata({"/Title": f"Attention, Step by Step ({edition})",
                         "/Author": "The Attention, Step by Step authors"})
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as handle:
        writer.write(handle)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=REPO / "_build" / "html")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--instructor", action="store_true", help="print the solutions too")
    args = parser.parse_args(argv)
    name = "attention-step-by-step-instructors.pdf" if args.instructor else "attention-step-by-step.pdf"
    out = args.out or REPO / "_build" / "pdf" / name
    start = time.monotonic()
    report = print_book(args.site, out, instructor=args.instructor)
    for row in report:
        flags = f"  CODE CUT OFF: {row['cut_off']}" if row["cut_off"] else ""
        print(f"  {row['page']:32s} {row['pages']:3d} pages  {row['removed']:2d} solutions left out{flags}")
    print(f"{out}: {sum(r['pages'] for r in report)} pages in {time.monotonic() - start:.0f} s")
    return 1 if any(r["cut_off"] or not r["ready"] for r in report) else 0


if __name__ == "__main__":
    sys.exit(main())
