"""Helpers for the real-browser tests: a loopback static server, headless Chromium, its network log.

Chromium is Debian's (``apt-get install chromium chromium-driver``, see ``.ci/run``); Selenium
Manager cannot download a browser here, so the binary and the driver are named explicitly. Every
request the page makes is read from the DevTools performance log (``goog:loggingPrefs``), so a
request to any host other than loopback is seen even though it could not succeed.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import mimetypes
import os
import shutil
import tempfile
import time
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlparse, urlsplit

import pytest

from attnsite import print_book  # the print edition's loopback server

REPO = Path(__file__).resolve().parents[1]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROME_FLAGS = (*print_book.OFFLINE_FLAGS, "--window-size=1280,900")  # Chromium's flags: one home, the print edition's
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
# data:, blob:, about: and the browser's own internal pages (its start page, error pages) never leave the machine
LOCAL_SCHEMES = {"data", "blob", "about", "chrome", "chrome-error", "chrome-untrusted", "devtools"}
COMPRESSIBLE = (".html", ".js", ".css", ".json", ".svg", ".txt", ".map", ".xml", ".ttf", ".eot")


def chromium_missing() -> str | None:
    """Why Chromium cannot run here (a message), or None when the binary and driver are installed."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    if missing:
        return (f"expected Debian chromium and chromium-driver at {', '.join(missing)}; install them with "
                f"`apt-get install -y chromium chromium-driver` (what .ci/run does)")
    return None


# --- a static server on loopback that compresses like a real host -------------------------------------


@functools.lru_cache(maxsize=512)
def _gzipped(path: str, mtime: float) -> bytes:
    return gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)


class _Handler(SimpleHTTPRequestHandler):
    """Static files; gzip for text when the browser accepts it (as GitHub Pages or nginx do); no caching."""

    def send_head(self):
        path = self.translate_path(self.path)
        wants_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (wants_gzip and os.path.isfile(path) and path.endswith(COMPRESSIBLE)):
            return super().send_head()
        body = _gzipped(path, os.path.getmtime(path))
        self.send_response(200)
        self.send_header("Content-Type", mimetypes.guess_type(path)[0] or "application/octet-stream")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        pass


def serve(directory: Path) -> AbstractContextManager[str]:
    """Serve ``directory`` on 127.0.0.1 (a free port) in a thread, compressing as above (the print
    edition's server, attnsite/print_book.py, with this handler); yields the base URL ending in '/'."""
    return print_book.serve(directory, _Handler)


# --- headless Chromium -------------------------------------------------------------------------------


@contextmanager
def chromium(width: int = 1280, height: int = 900, scrollbars: bool = False):
    """A headless Chromium (fresh profile, cache off) whose console and network are logged.

    With ``scrollbars``, classic scrollbars are drawn and take room, as on Windows and most Linux desktops
    (headless Chromium otherwise hides them, ``--hide-scrollbars``): what a needless scrollbar looks like
    is only seen, and measured, with them.
    """
    from selenium import webdriver  # noqa: PLC0415 - only the browser tests need selenium
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    profile = tempfile.mkdtemp(prefix="attnlib-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        if not (scrollbars and flag == "--hide-scrollbars"):
            options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_window_size(width, height)
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        driver.set_script_timeout(60)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# --- what the page did on the network ----------------------------------------------------------------


@dataclass
class Request:
    """One network request of a page, from the DevTools log."""

    url: str
    kind: str = ""
    status: int | None = None
    transferred: int = 0  # bytes on the wire (compressed, with headers)
    size: int = 0  # bytes after decompression
    error: str | None = None


def performance_messages(driver) -> list[dict]:
    """Drain the DevTools performance log: a list of {'method': ..., 'params': ...}."""
    return [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]


def _apply(requests: dict[str, Request], method: str, params: dict) -> None:
    rid = params.get("requestId")
    if method == "Network.requestWillBeSent":
        requests[rid] = Request(url=params["request"]["url"], kind=params.get("type", ""))
    elif method == "Network.webSocketCreated":
        requests[rid] = Request(url=params["url"], kind="WebSocket")
    elif rid in requests and method == "Network.responseReceived":
        requests[rid].status = params["response"]["status"]
    elif rid in requests and method == "Network.dataReceived":
        requests[rid].size += params["dataLength"]
    elif rid in requests and method == "Network.loadingFinished":
        requests[rid].transferred = int(params["encodedDataLength"])
    elif rid in requests and method == "Network.loadingFailed":
        requests[rid].error = params.get("blockedReason") or params.get("errorText", "failed")


def network_requests(messages: list[dict]) -> list[Request]:
    """Every request in ``messages`` (performance-log entries), with status, bytes and errors."""
    requests: dict[str, Request] = {}
    for message in messages:
        _apply(requests, message["method"], message.get("params", {}))
    return list(requests.values())


def is_loopback(url: str) -> bool:
    """True for URLs that never leave this machine (loopback hosts, data:, blob:, about:)."""
    parts = urlsplit(url)
    return parts.scheme in LOCAL_SCHEMES or (parts.hostname or "") in LOOPBACK


def wait_network_idle(driver, quiet_s: float = 0.75, timeout_s: float = 30.0) -> list[dict]:
    """Drain the performance log until no network event came for ``quiet_s``; returns what was read."""
    messages, last, deadline = [], time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() - last < quiet_s and time.monotonic() < deadline:
        new = [m for m in performance_messages(driver) if m["method"].startswith("Network.")]
        if new:
            messages.extend(new)
            last = time.monotonic()
        time.sleep(0.1)
    return messages


def console_errors(driver) -> list[str]:
    """Drain the browser console log; returns the SEVERE entries (errors, failed loads)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def full_page_screenshot(driver, path: Path, max_height: int = 16000, scale: float = 1.0,
                         quality: int | None = None) -> Path:
    """Write an image of the whole page (up to ``max_height`` CSS pixels tall) to ``path``: a PNG, or a JPEG of
    ``quality`` (1-100) when given; ``scale`` shrinks it (0.5: half the CSS pixels in each direction).

    The window is made as tall as the page for the shot, so sticky sidebars and headers stay where a
    reader sees them; the window size is restored afterwards.
    """
    import base64  # noqa: PLC0415

    width, height = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    full = min(driver.execute_script("return document.documentElement.scrollHeight"), max_height)
    metrics = {"width": width, "height": full, "deviceScaleFactor": 1, "mobile": False}
    options: dict = {"format": "png"}
    if quality is not None:
        options = {"format": "jpeg", "quality": int(quality)}
    if scale != 1.0:
        options["clip"] = {"x": 0, "y": 0, "width": width, "height": full, "scale": scale}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", options)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def require_chromium() -> None:
    """Fail (not skip) the calling test with the install command when Chromium is missing."""
    reason = chromium_missing()
    if reason:
        pytest.fail(reason, pytrace=False)


# The site's weight budget (../shared/GUIDE.md): what a page adds on top of the shared libraries (its HTML,
# figures, inline widget and view states) stays under 1.5 MB gzip; the shared libraries (theme, the math's stylesheet,
# the widget runtime, fonts: everything under _static/, and the search index) are loaded once and cached.
PAGE_BUDGET_BYTES = 1_500_000
SHARED_BUDGET_BYTES = 1_500_000  # and those shared libraries together, so none grows unnoticed


def is_shared(url: str) -> bool:
    """True for a file every page may load once and then take from the cache (under ``_static/``)."""
    path = urlparse(url).path
    return "/_static/" in path or path.endswith("/searchindex.js")


def weight(requests: list[Request]) -> tuple[int, int]:
    """``(own, shared)`` bytes transferred: the page's own files, and the shared libraries it loaded."""
    shared = sum(r.transferred for r in requests if is_shared(r.url))
    return sum(r.transferred for r in requests) - shared, shared



# --- accessibility checks shared by the site's tests (axe-core, reflow, colour mode) ---------------------

AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
SET_MODE = """
const mode = arguments[0];
document.documentElement.dataset.theme = mode;
document.documentElement.dataset.mode = mode;
try { localStorage.setItem('theme', mode); localStorage.setItem('mode', mode); } catch (e) {}
"""
SETTLED = """
const done = arguments[arguments.length - 1];
const deadline = Date.now() + 3000;  // the theme's colour transitions, then one more frame
(function wait() {
  if (document.getAnimations().some(a => a.playState === 'running') && Date.now() < deadline) {
    setTimeout(wait, 50);
  } else { requestAnimationFrame(() => requestAnimationFrame(() => done(true))); }
})();
"""
RUN_AXE = """
const done = arguments[arguments.length - 1];
const tags = arguments[0];
const context = arguments[1] ? {include: arguments[1].filter(s => document.querySelector(s)).map(s => [s])} : document;
axe.run(context, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
  .then(r => done({violations: r.violations.map(v => ({
      id: v.id, impact: v.impact, tags: v.tags, help: v.help,
      nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(' '), summary: n.failureSummary,
                                             html: n.html.slice(0, 200)})),
      count: v.nodes.length}))}),
        e => done({error: String(e)}));
"""
# elements that stick out of the window without a scrolling ancestor (WCAG 1.4.10 reflow), and explorer
# controls squeezed below a usable width
OVERFLOW = """
const width = document.documentElement.clientWidth;
const scrolls = e => { for (let p = e.parentElement; p; p = p.parentElement) {
  const s = getComputedStyle(p); if (/(auto|scroll|hidden)/.test(s.overflowX)) { return true; } } return false; };
const wide = Array.from(document.querySelectorAll('body *')).filter(e => {
  const r = e.getBoundingClientRect(); return r.width > 0 && r.right > width + 1 && !scrolls(e);
}).slice(0, 8).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + String(e.className).slice(0, 40)
                     + ' right=' + Math.round(e.getBoundingClientRect().right));
const narrow = Array.from(document.querySelectorAll('.attnlib-explorer .slider-container, .attnlib-explorer select'))
  .map(e => Math.round(e.getBoundingClientRect().width)).filter(w => w < 120);
return {scrollWidth: document.documentElement.scrollWidth, width: width, wide: wide, narrow: narrow};
"""


def set_mode(driver, mode: str) -> None:
    """Switch the page to the theme's ``light`` or ``dark`` mode, as its own switch does, and wait it out."""
    driver.execute_script(SET_MODE, mode)
    driver.execute_async_script(SETTLED)
    driver.execute_script("window.attnlibA11y && window.attnlibA11y.fixAll();")


def run_axe(driver, tags=(*WCAG_TAGS, "best-practice"), parts=None) -> list[dict]:
    """axe-core's violations on the page as it is now (axe injected once per page); ``parts``: CSS selectors of
    the only elements to check (those present), e.g. what a reader's action changed, else the whole page."""
    if not driver.execute_script("return !!window.axe"):
        driver.execute_script(AXE.read_text(encoding="utf-8"))
    result = driver.execute_async_script(RUN_AXE, list(tags), list(parts) if parts else None)
    assert "error" not in result, f"axe-core failed: {result.get('error')}"
    return result["violations"]


def wcag_violations(driver, parts=None) -> list[dict]:
    """The WCAG 2.1 A/AA violations only (best practice left out), of the page or of ``parts``."""
    return run_axe(driver, WCAG_TAGS, parts)


def describe_violations(violations: list[dict]) -> str:
    return "\n".join(f"  {v['id']} ({v['impact']}, {v['count']} nodes): {v['help']}\n    "
                     + "\n    ".join(f"{n['target']}: {n['summary']}" for n in v["nodes"]) for v in violations)


def overflow(driver) -> dict:
    """``OVERFLOW``'s findings: the page's scroll width, the window's, what sticks out, too-narrow controls."""
    return driver.execute_script(OVERFLOW)
