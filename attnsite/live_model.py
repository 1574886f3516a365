"""Sphinx extension: chapter 6's "your own sentence" section, computed in the reader's browser.

When an HTML build starts it puts into ``<outdir>/_static/``:

* ``_live/minilm-attention.onnx.gz``: all-MiniLM-L6-v2 exported from the packaged weights with every
  layer's attention as an output, at the precision ``live_export.py`` chose by measurement, gzip-compressed
  (the page inflates it); the graph takes the sentence's word embeddings, which are in
  ``_live/word-embeddings/<k>.bin`` (64 rows of the table each, float32): Run fetches only the files its
  tokens need. The export (about 16 CPU-s) is cached in the repository's ``_build/live-model/`` under a key of
  its inputs (one cache for every output folder, e.g. the instructor edition's), so a build that
  changes nothing only compares a hash and copies nothing;
* ``_live/tokenizer.json`` and ``tokenizer_config.json`` (the model's own), ``_live/bertviz-views.js``
  (BertViz's head and model view code, ``live_views.bertviz_script``) and ``_live/attnlib-live.js``
  (``attnsite/static/``);
* from npm: ONNX Runtime Web's WebAssembly build (one ``.mjs`` bundle and its ``.wasm``, which the page
  downloads gzip-compressed, 3.7 instead of 14.2 MB, and inflates itself; the threaded
  build runs single-threaded without cross-origin isolation, so no special server headers) and
  ``@huggingface/tokenizers``, under ``_vendor/``.

None of it is in a *source* ``_static/`` folder, so Jupyter Book does not add it to every page. On a
page whose body holds the live section (``id="attnlib-live"``) it adds ``attnlib-live.js`` (deferred,
a few kB) and, inline, the manifest: the URLs and sizes Run will download, and where the word-embedding
files are. The runtime, the model and those files are fetched only when the reader presses Run.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

from attnlib.views.html import script_json

from . import live_export as live
from . import live_views
from . import site_assets as assets
from .sources import digest

CACHE = assets.REPO / "_build" / "live-model"  # shared by every output folder

logger = logging.getLogger(__name__)
LIVE_DIR = "_static/_live"  # under the output folder
SCRIPT = "attnlib-live.js"
MARKER = 'id="attnlib-live"'
# site path (under the output folder) -> file under node_modules
VENDORED = {
    f"{assets.VENDOR_DIR}/onnxruntime-web/ort.wasm.bundle.min.mjs": "onnxruntime-web/dist/ort.wasm.bundle.min.mjs",
    f"{assets.VENDOR_DIR}/onnxruntime-web/ort-wasm-simd-threaded.wasm":
        "onnxruntime-web/dist/ort-wasm-simd-threaded.wasm",
    f"{assets.VENDOR_DIR}/tokenizers/tokenizers.min.mjs": "@huggingface/tokenizers/dist/tokenizers.min.mjs",
    f"{assets.VENDOR_DIR}/tokenizers/LICENSE": "@huggingface/tokenizers/LICENSE",
}
# what the page downloads on Run, in this order (the manifest's "files")
DOWNLOADS = {
    "runtime": f"{assets.VENDOR_DIR}/onnxruntime-web/ort.wasm.bundle.min.mjs",
    "wasm": f"{assets.VENDOR_DIR}/onnxruntime-web/ort-wasm-simd-threaded.wasm.gz",  # 14.2 MB as 3.7 MB
    "tokenizers": f"{assets.VENDOR_DIR}/tokenizers/tokenizers.min.mjs",
    "tokenizer": f"{LIVE_DIR}/tokenizer.json",
    "tokenizer_config": f"{LIVE_DIR}/tokenizer_config.json",
    "model": f"{LIVE_DIR}/{live.MODEL_FILE}.gz",  # made gzipped by live_export
    "views": f"{LIVE_DIR}/bertviz-views.js",
}


def copy_file(source: Path, destination: Path) -> None:
    """Copy unless an identical file (size and mtime: copy2 keeps it) is already there."""
    if destination.is_file() and filecmp.cmp(source, destination, shallow=True):
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, destination)


GZIPPED = {"wasm", "model"}  # downloads stored gzip-compressed: the page inflates them (DecompressionStream)
SHARDS = f"{LIVE_DIR}/{live.SHARD_DIR}"  # the word-embedding files, <k>.bin


def _gzip(source: Path, destination: Path) -> None:
    """``destination`` = ``source`` gzip-compressed, unless it is already newer than ``source``.

    WebAssembly shrinks to a quarter, and a static host may not compress it: the page asks for this copy.
    """
    if destination.is_file() and destination.stat().st_mtime >= source.stat().st_mtime:
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    live.gzip_file(source, destination)


def _write(path: Path, text: str) -> None:
    """Write ``text`` unless the file already holds it (keeps mtimes of unchanged files)."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def manifest(outdir: Path, report: dict) -> dict:
    """What the page needs to know before it downloads anything: URLs (from the site root) and sizes."""
    files = {name: {"url": path, "bytes": (outdir / path).stat().st_size, "gzip": name in GZIPPED}
             for name, path in DOWNLOADS.items()}
    model = {key: report[key] for key in ("precision", "bytes", "gzip_bytes", "max_error", "tolerance")}
    embeddings = {"url": f"{SHARDS}/", **report["embeddings"]}
    return {"files": files, "model": model, "embeddings": embeddings, "input": live.INPUT, "max_positions": 512}


def write_live_files(app: Sphinx) -> None:
    """builder-inited: export (or reuse) the model and put every file the live section needs in the site.

    Done before the pages are written, so that each page can say what Run will download.
    """
    if app.builder is None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    try:
        report = live.build_model(CACHE, log=logger.info)
        root = assets.node_modules()
        for site_path, source in VENDORED.items():
            if not (root / source).is_file():
                raise FileNotFoundError(f"expected {root / source} from npm (run `npm ci`), got no such file")
            copy_file(root / source, outdir / site_path)
    except (FileNotFoundError, RuntimeError, ImportError) as error:
        raise ExtensionError(f"live model: {error}") from error
    _gzip(outdir / DOWNLOADS["wasm"].removesuffix(".gz"), outdir / DOWNLOADS["wasm"])
    copy_file(Path(report["path"] + ".gz"), outdir / DOWNLOADS["model"])
    for shard in (Path(report["path"]).parent / live.SHARD_DIR).glob("*.bin"):
        copy_file(shard, outdir / SHARDS / shard.name)
    for name, data in live_views.tokenizer_files().items():
        _write(outdir / LIVE_DIR / name, json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    source = digest(live_views.sources(), length=8)
    views = Path(report["path"]).parent / f"bertviz-views-{report['key']}-{source}.js"  # importing bertviz: 1 s
    if not views.is_file():
        views.write_text(live_views.bertviz_script(), encoding="utf-8")
    copy_file(views, outdir / LIVE_DIR / "bertviz-views.js")
    copy_file(assets.STATIC / SCRIPT, outdir / LIVE_DIR / SCRIPT)
    app.config._attnlib_live_manifest = manifest(outdir, report)  # noqa: SLF001 - read by add_page_script
    logger.info(f"live_model: {report['precision']} weights, {report['gzip_bytes'] / 1e6:.1f} MB gzipped, "
                f"max |attention - eager| {report['max_error']:.1e} on {len(live.SENTENCES)} sentences")


def add_page_script(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """html-page-context: on the page that holds the live section (and no other), its script and manifest."""
    if MARKER not in (context.get("body") or ""):
        return
    data = script_json(getattr(app.config, "_attnlib_live_manifest", None))
    app.add_js_file(None, body=f"window.attnlibLiveManifest = {data};")
    app.add_js_file(f"_live/{SCRIPT}", loading_method="defer")  # relative to _static/, this page only


def setup(app: Sphinx) -> dict:
    """Register the build step and the per-page script."""
    app.connect("builder-inited", write_live_files)
    app.connect("html-page-context", add_page_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
