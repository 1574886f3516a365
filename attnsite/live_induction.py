"""Sphinx extension: chapter 9's live induction head, computed in the reader's browser with no kernel.

Chapter 9 trains a tiny ``attnlib.induction.AttentionOnlyTransformer`` (2 layers of 2 heads, D = 64, a
vocabulary of 32 symbols; about 39,000 numbers) with ``attnlib.induction.grow_induction_head``, whose settings
(``ARCHITECTURE``, ``TRAINING``, ``PROBE``, ``SYMBOLS``) live in ``attnlib.induction`` for the chapter and
this build alike. When an HTML build starts, ``write_induction_files`` trains it again the same way
(``train_chapter_model``, on the CPU), names its heads as the chapter does, by their scores against the
positional floor (``head_roles``), and puts into ``<outdir>/_static/_live/``:

* ``induction-model.json``: the shapes, the symbols, the heads' roles and scores, and every weight as
  little-endian float32 in base64 (``export_weights``); the training (about 10 s) is cached in the
  repository's ``_build/live-induction/`` under a key of its inputs (``cache_key``: this module, every
  attnlib module the training imports, torch's version), so a build that changes nothing trains nothing;
* ``induction-live.js`` (``attnsite/static/``): the forward pass in plain JavaScript (float64 arithmetic on
  the float32 weights) and the section's drawing.

On the page whose body holds the section (``id="attnlib-induction"``) it adds the script (deferred) and,
inline, the model file's URL and size; the page downloads the weights only when the reader presses Run.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import torch
from sphinx.application import Sphinx
from sphinx.util import logging

from attnlib.induction import ARCHITECTURE, SYMBOLS, floored_scores, grow_induction_head, scoring_probes
from attnlib.views.html import script_json

from . import live_model
from .site_assets import REPO, STATIC
from .sources import digest, imported_modules

logger = logging.getLogger(__name__)
CACHE = REPO / "_build" / "live-induction"  # shared by every output folder
SCRIPT = "induction-live.js"
MODEL_FILE = "induction-model.json"
MARKER = 'id="attnlib-induction"'
# How chapter 9 names a head (cell 64006be9): an induction head's score stands more than 0.5 above its positional
# floor (the same score on sequences with nothing to copy); the previous-token head is the layer-1 head that leads
# on the previous-token score, with most of its weight (more than half) on the previous token.
INDUCTION_ABOVE_FLOOR = 0.5
PREVIOUS_TOKEN_SHARE = 0.5


def train_chapter_model() -> torch.nn.Module:
    """Chapter 9's trained AttentionOnlyTransformer, made the way the chapter makes it (on the CPU)."""
    model, _ = grow_induction_head()
    return model.eval()


def head_roles(model: torch.nn.Module) -> list[dict]:
    """Per head (layer-major): layer and head (from 1 and 0, as the chapter writes them), scores and role.

    The scores are the chapter's (``attnlib.induction.floored_scores`` on ``scoring_probes()``, as its figure of the
    heads' scores): ``previous``, ``induction`` and the induction score's positional ``floor``. A layer-2 head whose
    induction score stands more than ``INDUCTION_ABOVE_FLOOR`` above its floor is an "induction head"; the layer-1
    head with the highest previous-token score, if above ``PREVIOUS_TOKEN_SHARE``, is the "previous-token head". A
    score alone names nothing: on a fixed layout every head's floor is high (chapter 9, section 9.2).
    """
    scores = {name: value.tolist() for name, value in floored_scores(model, scoring_probes()).items()}
    roles = []
    for layer in range(ARCHITECTURE["num_layers"]):
        for head in range(ARCHITECTURE["num_heads"]):
            previous, induction, floor = (scores[name][layer][head] for name in ("previous", "induction", "floor"))
            leads = previous == max(scores["previous"][0])
            role = ("previous-token head" if layer == 0 and leads and previous > PREVIOUS_TOKEN_SHARE else
                    "induction head" if layer == 1 and induction - floor > INDUCTION_ABOVE_FLOOR else "")
            roles.append({"layer": layer + 1, "head": head, "previous": round(previous, 2),
                          "induction": round(induction, 2), "floor": round(floor, 2), "role": role})
    return roles


def _encode(tensor: torch.Tensor) -> dict:
    """A weight as ``{"shape", "data"}``: row-major little-endian float32, base64."""
    array = tensor.detach().cpu().numpy().astype("<f4")
    return {"shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode("ascii")}


def export_weights(model: torch.nn.Module) -> dict:
    """Everything the page's forward pass needs: shapes, symbols, roles and the weights (Linear: (out, in))."""
    weights = {"embed": _encode(model.embed.weight), "position": _encode(model.position.weight),
               "unembed": _encode(model.unembed.weight),
               "layers": [{name: _encode(getattr(layer, name).weight)
                           for name in ("q_proj", "k_proj", "v_proj", "out_proj")} for layer in model.layers]}
    return {**ARCHITECTURE, "symbols": SYMBOLS, "roles": head_roles(model), "weights": weights}


def decode_weights(data: dict) -> dict[str, np.ndarray]:
    """The inverse of ``export_weights``' encoding: ``{"embed", "position", "unembed", "layers.<i>.<name>"}``."""
    def array(entry):
        return np.frombuffer(base64.b64decode(entry["data"]), dtype="<f4").reshape(entry["shape"])

    out = {name: array(data["weights"][name]) for name in ("embed", "position", "unembed")}
    for index, layer in enumerate(data["weights"]["layers"]):
        out.update({f"layers.{index}.{name}": array(entry) for name, entry in layer.items()})
    return out


def cache_key() -> str:
    """What the trained weights depend on: this module, every attnlib module the training imports (its
    settings, model and training code, derived by ``sources.imported_modules``), and torch's version."""
    files = [Path(__file__), *imported_modules(grow_induction_head.__module__).values()]
    return digest(files, packages=("torch",))


def build_model(cache_dir: Path = CACHE, log=print) -> Path:
    """The exported model file in ``cache_dir``, trained once per ``cache_key``."""
    path = Path(cache_dir) / f"induction-model-{cache_key()}.json"
    if not path.is_file():
        data = json.dumps(export_weights(train_chapter_model()), separators=(",", ":"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data, encoding="utf-8")
        log(f"live_induction: trained chapter 9's model, {path.stat().st_size / 1e3:.0f} kB at {path}")
    return path


def write_induction_files(app: Sphinx) -> None:
    """builder-inited: train (or reuse) the model and put it and the script in the site."""
    if app.builder is None or app.builder.format != "html":
        return
    outdir = Path(app.outdir) / live_model.LIVE_DIR
    live_model.copy_file(build_model(log=logger.info), outdir / MODEL_FILE)
    live_model.copy_file(STATIC / SCRIPT, outdir / SCRIPT)


def add_page_script(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """html-page-context: on the page that holds the section (and no other), its script, the model's URL and size."""
    if MARKER not in (context.get("body") or ""):
        return
    model = Path(app.outdir) / live_model.LIVE_DIR / MODEL_FILE
    data = script_json({"model": f"{live_model.LIVE_DIR}/{MODEL_FILE}", "bytes": model.stat().st_size})
    app.add_js_file(None, body=f"window.attnlibInductionManifest = {data};")
    app.add_js_file(f"_live/{SCRIPT}", loading_method="defer")


def setup(app: Sphinx) -> dict:
    """Register the build step and the per-page script."""
    app.connect("builder-inited", write_induction_files)
    app.connect("html-page-context", add_page_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
