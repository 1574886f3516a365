"""The students' JupyterLab, set up by the instructors' JupyterHub recipe, in a real browser.

1. The recipe (book/instructors.md, "JupyterHub"; the ``students`` fixture, tests/course/students.py): its
   commands verbatim but for the folders, in a fresh folder: a clone of this checkout's HEAD (commit
   first), a venv from ``requirements.txt`` (kept in ``_build/student-env`` while the student requirements
   are unchanged: its first run pays minutes of pip) and the kernel registered under a prefix.
   HOME is empty and the clone has no node_modules: the views find their JavaScript in attnlib itself. The environment
   must hold no tool a student does not need.
2. JupyterLab from that environment (the students' jupyterlab and jupyterlab-myst) on 127.0.0.1 (token,
   throwaway config/settings/workspace folders, no update check, no news, no extension manager), in the
   clone. In headless Chromium, chapter 6 (``book/06_real_model.ipynb``) gets the recipe's kernel
   ("Attention, Step by Step"), its stored outputs are cleared and JupyterLab's own
   ``notebook:run-all-cells`` (Run > Run All Cells) runs it: the fresh output must hold BertViz's head view
   (an ``<svg>`` with attention lines) and the neuron view, and the saved notebook must inline the views'
   JavaScript (no CDN). Every request the page makes must stay on loopback.
3. Every chapter's markdown, as JupyterLab renders it with jupyterlab-myst: no raw MyST markup
   (``{cite}``, ``{eq}``, a directive's fence) may show.

Here chapter 6 runs in JupyterLab; test_release.py runs every released chapter in the same environment.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests import browser_utils as bu

pytestmark = pytest.mark.browser

CHAPTER = "book/06_real_model.ipynb"
KERNEL = "attention"  # the name the recipe registers its kernel under
TOKEN = "attnlib-browser-test"
SERVER_CONFIG = {  # nothing the server does may leave loopback either
    "LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
               "extension_manager": "readonly", "expose_app_in_browser": True},
    "ServerApp": {"open_browser": False, "port_retries": 0, "allow_root": True},  # CI runs as root
}

RUN_ALL = """
const done = arguments[arguments.length - 1];
const app = window.jupyterapp;
(async () => {
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  await panel.sessionContext.changeKernel({name: arguments[0]});  // the kernel students are told to pick
  await panel.sessionContext.ready;
  await app.commands.execute('notebook:clear-all-cell-outputs');
  const ok = await app.commands.execute('notebook:run-all-cells');
  await panel.context.save();  // File > Save: the outputs as a student's notebook stores them
  done({ok: ok, kernel: panel.sessionContext.session && panel.sessionContext.session.kernel.name});
})().catch(e => done({ok: false, error: String(e && e.stack || e)}));
"""

PROBE = """
const all = (s, root) => Array.from((root || document).querySelectorAll(s));
const visible = l => parseFloat(l.getAttribute('stroke-opacity') || '1') > 0;
const view = r => ({id: r.id, svgs: all('svg', r).length, lines: all('svg line', r).filter(visible).length});
return {
  heads: all('.jp-OutputArea [id^="attnlib-head-"]').map(view),
  models: all('.jp-OutputArea [id^="attnlib-model-"]').map(view),
  neurons: all('.jp-OutputArea [id^="attnlib-neuron-"]').map(r => ({id: r.id, svgs: all('svg', r).length,
           texts: all('svg text', r).length, button: all('button.attnlib-expand', r).length})),
  errors: all('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"], '
              + '.jp-RenderedText[data-mime-type="application/vnd.jupyter.error"]')
          .map(e => e.textContent.slice(0, 500)),
  busy: all('.jp-InputPrompt').filter(p => p.textContent.includes('*')).length,
};
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_recipe_makes_a_students_environment_and_kernel(students):
    tools = subprocess.run([students["python"], "-c", "import importlib.util as u; print([m for m in ('nbgrader', "
                            "'pytest', 'jupyter_book', 'selenium', 'ruff') if u.find_spec(m)])"],
                           capture_output=True, text=True, check=True)
    assert tools.stdout.strip() == "[]", f"tools in the students' environment: {tools.stdout}"
    kernels = list((students["prefix"] / "share" / "jupyter" / "kernels").glob("*/kernel.json"))
    assert [k.parent.name for k in kernels] == [KERNEL], f"expected the recipe's kernel {KERNEL!r}, got {kernels}"
    spec = json.loads(kernels[0].read_text(encoding="utf-8"))
    assert spec["argv"][0] == str(students["python"]), f"the kernel runs {spec['argv'][0]}, not the recipe's venv"


def _wait_for_server(url: str, process: subprocess.Popen, log: Path, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RuntimeError(f"expected JupyterLab to keep running, it exited with {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"expected JupyterLab to answer {url} within {timeout_s:.0f} s, it did not")


def _environment(home: Path, students: dict) -> dict:
    config = home / "config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(json.dumps(SERVER_CONFIG), encoding="utf-8")
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}), encoding="utf-8")
    notebook = home / "settings" / "@jupyterlab" / "notebook-extension"  # render every cell, not just those in view
    notebook.mkdir(parents=True)
    (notebook / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}), encoding="utf-8")
    env = dict(students["env"], JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               JUPYTER_PATH=str(students["prefix"] / "share" / "jupyter"),  # where the recipe put its kernel
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("JUPYTER_TOKEN", None)
    return env


def _stop(process: subprocess.Popen, base: str) -> None:
    if process.poll() is not None:
        return
    request = urllib.request.Request(f"{base}api/shutdown", method="POST",
                                     headers={"Authorization": f"token {TOKEN}"})
    try:
        urllib.request.urlopen(request, timeout=10).close()  # stops its kernels too
        process.wait(timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory, students):
    """JupyterLab from the recipe's environment, serving the recipe's clone: (base URL, chapter 6's path)."""
    bu.require_chromium()
    home = tmp_path_factory.mktemp("jupyterlab")
    root = students["clone"]
    assert (root / CHAPTER).is_file(), f"{CHAPTER} is missing: the JupyterLab test runs the real-model chapter"
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    command = [str(students["python"]), "-m", "jupyterlab", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}"]
    log_path = home / "jupyterlab.log"
    log = log_path.open("w")
    process = subprocess.Popen(command, cwd=root, env=_environment(home, students), stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for_server(f"{base}api/status?token={TOKEN}", process, log_path)
        yield base, CHAPTER
    finally:
        _stop(process, base)
        log.close()


def _wait_notebook_open(driver, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    script = ("const a = window.jupyterapp; const w = a && a.shell.currentWidget;"
              "return !!(w && w.content && w.content.widgets && w.content.widgets.length && w.context);")
    while time.monotonic() < deadline:
        if driver.execute_script(script):
            return
        time.sleep(0.5)
    raise TimeoutError("expected JupyterLab to open the notebook, no notebook panel appeared")


def _wait_head_view(driver, timeout_s: float = 60.0) -> dict:
    deadline, probe = time.monotonic() + timeout_s, driver.execute_script(PROBE)
    while time.monotonic() < deadline and not any(v["lines"] for v in probe["heads"]):
        time.sleep(0.5)
        probe = driver.execute_script(PROBE)
    return probe


def _screenshot_head_view(driver, path: Path) -> None:
    driver.execute_script("const v = document.querySelector('.jp-OutputArea [id^=\"attnlib-head-\"]');"
                          "if (v) { v.scrollIntoView({block: 'center'}); }")
    time.sleep(0.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))


def test_head_view_renders_in_jupyterlab(jupyterlab, students, capsys):
    base, notebook = jupyterlab
    start = time.monotonic()
    with bu.chromium(width=1400, height=1000) as driver:
        driver.set_script_timeout(600)
        driver.get(f"{base}lab/tree/{notebook}?token={TOKEN}")
        _wait_notebook_open(driver)
        result = driver.execute_async_script(RUN_ALL, KERNEL)
        probe = _wait_head_view(driver)
        requests = bu.network_requests(bu.wait_network_idle(driver))
        _screenshot_head_view(driver, bu.REPO / "_build" / "screenshots" / "jupyterlab" / f"{Path(notebook).stem}.png")
    with capsys.disabled():
        print(f"\nJupyterLab: ran {notebook} in {time.monotonic() - start:.1f} s, {len(requests)} requests, "
              f"head views {probe['heads']}, model views {probe['models']}, neuron views {probe['neurons']}")
    assert result.get("ok") is True, f"expected Run All Cells to finish, got {result}"
    assert result.get("kernel") == KERNEL, f"expected the recipe's kernel {KERNEL!r}, got {result}"
    assert probe["errors"] == [], f"cells wrote errors: {probe['errors']}"
    assert probe["heads"], f"expected a head view in the outputs of {notebook}, got {probe}"
    assert all(v["svgs"] > 0 and v["lines"] > 0 for v in probe["heads"]), probe["heads"]
    assert probe["neurons"], f"expected the neuron view in the outputs of {notebook}, got {probe}"
    assert all(v["svgs"] > 0 and v["texts"] > 0 and v["button"] == 1 for v in probe["neurons"]), probe["neurons"]
    outside = [r.url for r in requests if not bu.is_loopback(r.url)]
    assert outside == [], f"JupyterLab page requests leaving loopback: {outside}"
    saved = (students["clone"] / notebook).read_text(encoding="utf-8")
    assert "https://d3js.org v5.7.0" in saved and "jQuery v2.2.4" in saved, "the views inline their JavaScript"
    assert "cdnjs" not in saved


# --- MyST markup renders (jupyterlab-myst) ---------------------------------------------------------------

RAW_MYST = re.compile(r"\{(cite|cite:p|cite:t|eq|ref|numref|doc|math|glue)\}|```\{|:::\{|\{bibliography\}"
                      r"|\{admonition\}")
OPEN = """
const done = arguments[arguments.length - 1];
const app = window.jupyterapp;
(async () => {
  for (const widget of Array.from(app.shell.widgets('main'))) { widget.dispose(); }  // only this notebook open
  const panel = await app.commands.execute('docmanager:open', {path: arguments[0]});
  await panel.context.ready;
  app.shell.activateById(panel.id);
  done({ok: app.shell.currentWidget === panel});
})().catch(e => done({error: String(e && e.stack || e)}));
"""
MARKDOWN = """
const done = arguments[arguments.length - 1];
const app = window.jupyterapp;
(async () => {
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  const deadline = Date.now() + 60000;
  const cells = () => panel.content.widgets.filter(c => c.model.type === 'markdown');
  const pending = () => cells().some(c => !c.rendered || !c.node.innerText.trim());
  while (Date.now() < deadline && pending()) { await new Promise(r => setTimeout(r, 250)); }
  await new Promise(r => setTimeout(r, 1500));
  done({count: cells().length, pending: pending(),
        texts: cells().map(c => c.node.innerText),  // the hidden editor (display: none) is not in innerText
        maths: cells().reduce((n, c) => n + c.node.querySelectorAll('.katex, mjx-container').length, 0)});
})().catch(e => done({error: String(e && e.stack || e)}));
"""


def test_chapters_show_no_raw_myst_in_jupyterlab(jupyterlab, students):
    base, _ = jupyterlab
    chapters = sorted(p.name for p in (students["clone"] / "book").glob("[0-9][0-9]_*.ipynb"))  # HEAD's
    assert chapters, "expected chapter notebooks in book/"
    with bu.chromium(width=1400, height=1000) as driver:
        driver.set_script_timeout(120)
        driver.get(f"{base}lab/tree/book/{chapters[0]}?reset&token={TOKEN}")  # reset: only this notebook open
        _wait_notebook_open(driver)
        for name in chapters:  # one JupyterLab page: each chapter opened as File > Open would, the last one closed
            opened = driver.execute_async_script(OPEN, f"book/{name}")
            assert opened.get("ok"), f"{name}: JupyterLab did not open it: {opened}"
            deadline = time.monotonic() + 45
            while True:  # MyST renders asynchronously, cell by cell
                result = driver.execute_async_script(MARKDOWN)
                assert "error" not in result, f"{name}: {result}"
                raw = [m.group(0) for text in result["texts"] for m in RAW_MYST.finditer(text)]
                if not raw or time.monotonic() > deadline:
                    break
            assert result["count"] > 0 and raw == [], f"{name}: JupyterLab shows raw MyST markup {raw[:10]}"
            assert not result["pending"], f"{name}: markdown cells left unrendered"
            assert result["maths"] > 0, f"{name}: no math typeset in the markdown cells"
