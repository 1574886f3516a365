"""Chapter 9's live induction head: the build's export (``attnsite/live_induction.py``) and the page that runs it.

The export tests check that the weights the site serves are the chapter's trained model (its stored
ablation losses come out again), name the heads as the chapter does, and are retrained when any code the
training imports changes. The browser tests read the built
site (``make book``; ``ATTNLIB_SITE_HTML`` points at another build), serve it on 127.0.0.1, type sequences
into Chapter 9's live section in headless Chromium and compare ``window.attnlibInduction.attend`` with
attnlib's ``AttentionOnlyTransformer`` on every layer and head.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlib.induction import ARCHITECTURE, SYMBOLS, AttentionOnlyTransformer, repeated_tokens
from attnlib.interpret import ablation_loss
from attnsite import live_induction as li
from attnsite.execution import executed
from attnsite.site_assets import STATIC
from attnsite.sources import imported_modules
from tests import browser_utils as bu

SITE = Path(os.environ.get("ATTNLIB_SITE_HTML", bu.REPO / "_build" / "html"))
PAGE = "book/09_induction.html"
CHAPTER = bu.REPO / "book" / "09_induction.ipynb"
SECTION_CELL = "live-induction"  # the chapter's markdown cell that holds the section
SCRIPT = STATIC / li.SCRIPT
TOLERANCE = 1e-5  # the page's weights against attnlib's in float32 (the page computes in float64)
SEQUENCES = (  # a repeat, a repeat of a different length, no repeat, one token, lower case, the full 32
    "W O R K I N G 5 W O R K I N G 5",
    "QZ3XAQZ3XAQZ",
    "A B C D E F G H",
    "K",
    "heLLohello",
    "ABCDEFGHIJKLMNOP" * 2,
)


@pytest.fixture(scope="module")
def exported() -> dict:
    """The model file the build serves (trained here, about 20 s, when the build's cache lacks it)."""
    return json.loads(li.build_model().read_text(encoding="utf-8"))


def _model(exported: dict, dtype=torch.float32) -> AttentionOnlyTransformer:
    """An attnlib AttentionOnlyTransformer holding the exported weights."""
    model = AttentionOnlyTransformer(**ARCHITECTURE)
    arrays = li.decode_weights(exported)
    state = {"embed.weight": arrays["embed"], "position.weight": arrays["position"],
             "unembed.weight": arrays["unembed"]}
    for index in range(ARCHITECTURE["num_layers"]):
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            state[f"layers.{index}.{name}.weight"] = arrays[f"layers.{index}.{name}"]
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    return model.to(dtype).eval()


def _glued(name: str) -> float:
    """A number chapter 9 glued into its prose, from the chapter as the build executed it."""
    notebook = executed(CHAPTER)
    for cell in notebook["cells"]:
        if f'glue("{name}"' in "".join(cell["source"]):
            records = [o["data"] for o in cell.get("outputs", []) if "application/papermill.record/text/plain"
                       in o.get("data", {})]
            values = [d["application/papermill.record/text/plain"] for d in records]
            names = re.findall(r'glue\("(\w+)"', "".join(cell["source"]))
            return float(values[names.index(name)])
    raise AssertionError(f"expected chapter 9 to glue {name!r}, got no such glue call")


# --- the export ------------------------------------------------------------------------------------------


def test_the_exported_weights_are_the_chapters_trained_model(exported):
    """The chapter's losses (cell 90445885, glued unrounded; its prose prints them to 0.1) come out again from the
    served weights, within 0.05: the build trains the model again, and CPUs differ in the last bits."""
    model = _model(exported)
    evaluation = repeated_tokens(256, 16, 32, generator=torch.Generator().manual_seed(2024))  # the chapter's
    assert abs(ablation_loss(model, evaluation, 16) - _glued("loss_intact")) < 0.05
    assert abs(ablation_loss(model, evaluation, 16, [(0, 0)]) - _glued("loss_prev_zero")) < 0.05
    served = sum(int(np.prod(w.shape)) for w in li.decode_weights(exported).values())
    assert served == sum(p.numel() for p in model.parameters()) and round(served, -3) == _glued("induction_weights")


def test_heads_are_named_as_the_chapter_names_them(exported):
    """Chapter 9's names (layer 1 head 0 the previous-token head, both layer-2 heads induction heads), given by its
    rule: an induction score more than 0.5 above its positional floor, a previous-token score that leads layer 1
    with most of the head's weight; the scores served are the chapter's, floor included, with room to spare."""
    roles = {(r["layer"], r["head"]): r["role"] for r in exported["roles"]}
    assert roles == {(1, 0): "previous-token head", (1, 1): "", (2, 0): "induction head", (2, 1): "induction head"}
    above = {(r["layer"], r["head"]): r["induction"] - r["floor"] for r in exported["roles"]}
    assert min(above[2, 0], above[2, 1]) > li.INDUCTION_ABOVE_FLOOR + 0.2  # the chapter asserts more than 0.7
    assert max(above[1, 0], above[1, 1]) < li.INDUCTION_ABOVE_FLOOR - 0.2  # layer 1: near their floors
    previous = {key: r["previous"] for key, r in zip(roles, exported["roles"], strict=True)}
    assert previous[1, 0] > li.PREVIOUS_TOKEN_SHARE + 0.1 > previous[1, 1] + 0.1


def test_a_head_is_named_by_its_score_above_the_floor_not_by_its_score(monkeypatch):
    """A layer-2 head that scores high by position alone (its floor as high as its score) is no induction head, and
    one whose score clears its floor by more than the margin is; on made-up scores, through ``head_roles``."""
    made_up = {"previous": torch.tensor([[0.7, 0.1], [0.1, 0.1]]), "induction": torch.tensor([[0.3, 0.3], [0.8, 0.9]]),
               "floor": torch.tensor([[0.3, 0.3], [0.7, 0.2]])}
    monkeypatch.setattr(li, "floored_scores", lambda model, probes: made_up)
    roles = [r["role"] for r in li.head_roles(None)]
    assert roles == ["previous-token head", "", "", "induction head"]


def _section() -> str:
    notebook = json.loads(CHAPTER.read_text(encoding="utf-8"))
    cells = [cell for cell in notebook["cells"] if cell.get("id") == SECTION_CELL]
    assert len(cells) == 1 and cells[0]["cell_type"] == "markdown", f"expected chapter 9's cell {SECTION_CELL}"
    return "".join(cells[0]["source"])


def test_the_chapter_holds_the_section_with_every_part_the_script_uses():
    text = _section()
    assert text.count('id="attnlib-induction"') == 1 and "\n\n" not in text[text.index("<div"):]  # one HTML block
    script = SCRIPT.read_text(encoding="utf-8")
    for part in ("text", "run", "status", "output"):
        assert text.count(f'id="attnlib-induction-{part}"') == 1 and f"get('{part}')" in script


def test_the_default_sequence_shows_what_the_section_says(exported):
    """The sequence in the box repeats itself; from the second copy on, both layer-2 heads put most of each query's
    weight one past the earlier occurrence of its token (all but the last query), and the predictions continue it."""
    symbols = re.search(r'id="attnlib-induction-text"[^>]* value="([^"]+)"', _section()).group(1).split()
    half = len(symbols) // 2
    assert symbols[:half] == symbols[half:] and len(set(symbols[:half])) == half
    with torch.no_grad():
        logits, weights = _model(exported)(torch.tensor([[SYMBOLS.index(s) for s in symbols]]), need_weights=True)
    queries = torch.arange(half, 2 * half - 1)  # the last query's answer lies beyond the sequence
    hits = [int((weights[1][0, head, queries].argmax(-1) == queries - half + 1).sum()) for head in range(2)]
    assert hits == [half - 1, half - 1], hits
    predicted = [SYMBOLS[int(i)] for i in logits[0, half:-1].argmax(-1)]
    assert predicted == symbols[half + 1:]


@pytest.mark.slow
def test_the_cache_key_covers_every_attnlib_module_the_training_loads():
    """A fresh interpreter trains a few steps and scores the heads as the build does; every attnlib module it
    loaded is among the files the cache key hashes (``attnsite.sources.imported_modules``)."""
    program = """
import json, sys
import torch
from attnlib import induction
model = induction.AttentionOnlyTransformer(**induction.ARCHITECTURE)
induction.train_induction(model, **{**induction.TRAINING, "steps": 2})
induction.head_scores(model, induction.probe_tokens(), half=induction.PROBE["half"])
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "attnlib")))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300)
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    hashed = set(imported_modules("attnlib.induction"))
    assert {"attnlib.induction", "attnlib.softmax", "attnlib.scores", "attnlib._checks"} <= loaded
    assert loaded <= hashed, f"loaded by training but not in the cache key: {sorted(loaded - hashed)}"


def test_build_model_reuses_its_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(li, "cache_key", lambda: "fixed")
    (tmp_path / "induction-model-fixed.json").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(li, "train_chapter_model", lambda: pytest.fail("expected the cached file, got training"))
    assert li.build_model(tmp_path).read_text(encoding="utf-8") == "{}"


# --- the page in a browser ------------------------------------------------------------------------------

ATTEND = """
const [text, done] = [arguments[0], arguments[arguments.length - 1]];
window.attnlibInduction.attend(text).then(r => done({tokens: r.tokens, ids: r.ids, attentions: r.attentions,
  logits: r.logits, predictions: r.predictions}), e => done({error: String(e && e.message || e)}));
"""
PROBE = """
const root = document.getElementById('attnlib-induction');
return {state: root.dataset.state, status: document.getElementById('attnlib-induction-status').textContent,
  tables: root.querySelectorAll('table').length, rows: root.querySelectorAll('tr').length,
  captions: Array.from(root.querySelectorAll('caption')).map(c => c.textContent)};
"""


@pytest.fixture(scope="module")
def page():
    """Chapter 9 over loopback in one Chromium; yields (driver, requests made while the page loaded)."""
    if not (SITE / PAGE).is_file():
        pytest.fail(f"expected the built site at {SITE} (run `make book`), got no {PAGE}", pytrace=False)
    bu.require_chromium()
    with bu.serve(SITE) as base_url, bu.chromium() as driver:
        bu.performance_messages(driver)
        driver.get(base_url + PAGE)
        messages = bu.wait_network_idle(driver)
        driver.seen_messages = list(messages)
        yield driver, bu.network_requests(messages)


def _run(driver, text: str, how: str = "click") -> dict:
    """Type ``text``, then Run by clicking, by Enter in the box, or by Tab to the button and Space."""
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    box = driver.find_element("id", "attnlib-induction-text")
    box.clear()
    box.send_keys(text)
    driver.execute_script("document.getElementById('attnlib-induction').dataset.state = 'typed';")
    if how == "click":
        driver.find_element("id", "attnlib-induction-run").click()
    elif how == "enter":
        box.send_keys(Keys.ENTER)
    else:
        box.send_keys(Keys.TAB)
        assert driver.switch_to.active_element.get_attribute("id") == "attnlib-induction-run"
        driver.switch_to.active_element.send_keys(Keys.SPACE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        probe = driver.execute_script(PROBE)
        if probe["state"] in ("drawn", "error"):
            return probe
        time.sleep(0.05)
    pytest.fail(f"expected the section to finish within 30 s, got {driver.execute_script(PROBE)}")


pytestmark_browser = pytest.mark.browser


@pytestmark_browser
def test_nothing_loads_before_run(page):
    driver, requests = page
    assert not [r.url for r in requests if r.url.endswith(li.MODEL_FILE)]
    assert any(f"/_live/{li.SCRIPT}" in r.url for r in requests)  # with a ?v= version
    probe = driver.execute_script(PROBE)
    size = (SITE / li.live_model.LIVE_DIR / li.MODEL_FILE).stat().st_size
    assert probe["state"] == "ready" and f"downloads the weights ({round(size / 1e3)} kB)" in probe["status"], probe


@pytestmark_browser
def test_every_head_matches_attnlib_within_1e_5(page, exported, capsys):
    driver, _ = page
    model32, model64 = _model(exported), _model(exported, torch.float64)
    worst32 = worst64 = 0.0
    for text in SEQUENCES:
        result = driver.execute_async_script(ATTEND, text)
        assert "error" not in result, result
        symbols = [s for s in text.upper() if s not in " ,"]
        assert result["tokens"] == symbols
        tokens = torch.tensor([[SYMBOLS.index(s) for s in symbols]])
        got = np.asarray(result["attentions"], dtype=np.float64)  # (layers, H, L, L)
        with torch.no_grad():
            for model in (model32, model64):
                logits, weights = model(tokens, need_weights=True)
                expected = torch.stack([w[0] for w in weights]).double().numpy()
                assert got.shape == expected.shape
                error = float(np.abs(got - expected).max())
                if model is model32:
                    worst32 = max(worst32, error)
                else:
                    worst64 = max(worst64, error)
                    np.testing.assert_allclose(result["logits"], logits[0].numpy(), rtol=0, atol=1e-9)
                    assert result["predictions"] == [SYMBOLS[int(i)] for i in logits[0].argmax(-1)]
    with capsys.disabled():
        print(f"\nlive induction head: max |page - attnlib| over {len(SEQUENCES)} sequences, every head: "
              f"{worst32:.1e} (attnlib float32), {worst64:.1e} (attnlib float64)")
    assert worst32 <= TOLERANCE and worst64 <= 1e-12


@pytestmark_browser
@pytest.mark.parametrize("how", ["click", "enter", "keys"])
def test_run_draws_every_head_by_mouse_or_keyboard(page, how):
    driver, _ = page
    probe = _run(driver, "A B C D A B C", how)
    assert probe["state"] == "drawn", probe["status"]
    assert probe["tables"] == 4 and probe["rows"] == 4 * (1 + 7)
    assert [c.split(" (")[0] for c in probe["captions"]] == [
        "Layer 1, head 0: the previous-token head", "Layer 1, head 1",
        "Layer 2, head 0: the induction head", "Layer 2, head 1: the induction head"]
    regions = driver.find_elements("css selector", "#attnlib-induction-output [role=region]")
    assert len(regions) == 4 and all(r.get_attribute("tabindex") == "0" for r in regions)


@pytestmark_browser
@pytest.mark.parametrize(("text", "says"), [
    ("", "empty"),
    ("A B 7 C", "got “7” as symbol 3"),
    ("AB<img>", "got “<” as symbol 3"),
    # words are their letters (the help says "with or without spaces"): the first symbol it lacks is named
    ("hello world!", "got “!” as symbol 11"),
    ("A" * 33, "at most 32 symbols"),
])
def test_bad_input_says_what_was_expected_and_what_came(page, text, says):
    driver, _ = page
    probe = _run(driver, text)
    assert probe["state"] == "error" and says in probe["status"], probe["status"]
    assert "Expected" in probe["status"] or "empty" in probe["status"]
    assert driver.execute_script("return document.querySelectorAll('#attnlib-induction img').length") == 0


@pytestmark_browser
def test_after_run_the_section_passes_axe_in_both_modes(page):
    driver, _ = page
    probe = _run(driver, SEQUENCES[0])
    assert probe["state"] == "drawn", probe["status"]
    try:
        for width in (1280, 390):
            driver.set_window_size(width, 900)
            for mode in ("light", "dark"):
                bu.set_mode(driver, mode)
                found = bu.run_axe(driver, parts=["#attnlib-induction"])
                assert found == [], (f"after Run ({mode}, {width} px): {len(found)} axe violations\n"
                                     f"{bu.describe_violations(found)}")
            reflow = bu.overflow(driver)
            assert reflow["scrollWidth"] <= reflow["width"], f"after Run at {width} px the page is wider: {reflow}"
    finally:
        driver.set_window_size(1280, 900)
        bu.set_mode(driver, "light")


@pytestmark_browser
def test_no_request_left_loopback_and_no_console_errors(page):
    driver, _ = page
    driver.seen_messages.extend(m for m in bu.performance_messages(driver) if m["method"].startswith("Network."))
    requests = bu.network_requests(driver.seen_messages)
    assert sum(r.url.endswith(li.MODEL_FILE) for r in requests) == 1  # downloaded once, on the first Run
    assert [r.url for r in requests if not bu.is_loopback(r.url)] == []
    assert [(r.url, r.status, r.error) for r in requests if r.error or (r.status or 200) >= 400] == []
    assert bu.console_errors(driver) == []
