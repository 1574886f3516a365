"""What BertViz's three offline views share: checked layers and tokens, script-safe JSON, the shipped JavaScript.

``attnlib.views.bertviz`` (head and model view) and ``attnlib.views.neuron`` (neuron view) rewrite
the HTML and JavaScript that BertViz 1.4.1 writes. The pieces both need live here, under public
names:

* ``stack_layers`` and ``check_tokens``: the views' input, checked once, as one float64 CPU tensor;
* ``script_json``: the one JSON writer for data put inside a ``<script>`` (also used by the website's
  build, ``attnsite``);
* ``escape_text``: tokens as HTML text;
* ``javascript``: our JavaScript, shipped as ``.js`` files in ``attnlib/views/js/`` (package data,
  read with ``importlib.resources``, syntax-checked by the tests), and the two libraries BertViz
  draws with, d3 5.7.0 and jQuery 2.2.4, shipped in ``js/vendor/`` with their licences (copies of
  the npm files that ``package.json`` pins; a test checks they are identical), so a view works
  offline in JupyterLab with nothing but ``pip install``; the ``<script>`` that inlines them carries
  ``VENDORED_ATTRIBUTE`` naming them, so a website that serves the same files can swap the element for
  links to its copies (``attnsite.vendor_assets`` does);
* ``replace_once`` and the patterns of BertViz's require.js calls that every view removes;
* ``want_libraries`` and ``view_id``: the kernel-wide state (libraries inlined once, unique ids).
"""

from __future__ import annotations

import hashlib
import html as html_text
import itertools
import json
import re
from collections.abc import Sequence
from importlib.metadata import version
from importlib.resources import files

import numpy as np
import torch

GLOBAL = "attnlibBertviz"  # window property holding the private {$, d3} once the libraries ran (see runner.js)
VENDORED_ATTRIBUTE = "data-vendored"  # on the <script> that inlines the libraries; its value names them
# library name -> file under js/vendor/ (copied from node_modules; the licence notices beside them)
LIBRARY_FILES = {"d3": "vendor/d3.min.js", "jquery": "vendor/jquery.min.js"}
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_ids = itertools.count()
_sent = {"libraries": False}  # whether this process (kernel) has already put the libraries on its page

# BertViz's page: its require.js script element, its require.config(...) and requirejs([...], function ($, d3) {
CDN_REQUIRE = re.compile(r'<script src="https://[^"]*require[^"]*"></script>')
REQUIRE_CONFIG = re.compile(r"require\.config\(\{.*?\}\);\s*", re.DOTALL)
REQUIRE_CALL = re.compile(r"requirejs\(\[\s*'jquery',\s*'d3'\s*\],\s*function\s*\(\$,\s*d3\)\s*\{")
UUID_ID = re.compile(r"bertviz-[0-9a-f]{32}")


# --- the data -------------------------------------------------------------------------------------


def _layer(name: str, index: int, layer, width: str) -> torch.Tensor:
    """One layer as a float64 CPU tensor of shape (H, L, ``width``)."""
    shapes = f"(1, H, L, {width}) or (H, L, {width})"
    if isinstance(layer, torch.Tensor):
        t = layer.detach().to("cpu", torch.float64)
    elif isinstance(layer, np.ndarray):
        t = torch.from_numpy(np.asarray(layer, dtype=np.float64))
    else:
        raise TypeError(f"expected {name} layer {index} as a torch.Tensor or numpy.ndarray of shape {shapes}, "
                        f"got {type(layer).__qualname__}")
    if t.ndim == 4 and t.shape[0] == 1:
        t = t[0]
    if t.ndim != 3 or 0 in t.shape or (width == "L" and t.shape[1] != t.shape[2]):
        raise ValueError(f"expected {name} layer {index} of shape {shapes} (one sequence; select sequence b "
                         f"with {name}[i][b:b+1]), got {tuple(layer.shape)}")
    return t


def stack_layers(name: str, layers, width: str = "L") -> torch.Tensor:
    """A list of per-layer (1, H, L, W) or (H, L, W) tensors/arrays, checked -> (N, H, L, W) float64 on the CPU.

    ``name`` is what error messages call the list (``"attention"``, ``"queries"``); ``width`` names W:
    ``"L"`` (attention weights, square) or ``"Dk"`` (queries, keys).
    """
    if isinstance(layers, (torch.Tensor, np.ndarray)) or not isinstance(layers, Sequence):
        raise TypeError(f"expected {name} as a list with one (1, H, L, {width}) or (H, L, {width}) array per layer, "
                        f"got {type(layers).__qualname__}")
    if len(layers) == 0:
        raise ValueError(f"expected {name} for at least one layer, got an empty list")
    tensors = [_layer(name, i, layer, width) for i, layer in enumerate(layers)]
    for i, t in enumerate(tensors[1:], start=1):
        if t.shape != tensors[0].shape:
            raise ValueError(f"expected every {name} layer of shape (H, L, {width}) = {tuple(tensors[0].shape)} "
                             f"like layer 0, got {tuple(t.shape)} at layer {i}")
    stacked = torch.stack(tensors)  # N x (H, L, W) -> (N, H, L, W)
    if not torch.isfinite(stacked).all():
        raise ValueError(f"expected finite {name}, got NaN or inf")
    return stacked


def check_tokens(tokens, length: int) -> list[str]:
    """``tokens`` as a list of ``length`` strings (one per position), or a clear error."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"expected tokens as a list of {length} strings, got {type(tokens).__qualname__}")
    bad = [type(t).__qualname__ for t in tokens if not isinstance(t, str)]
    if bad:
        raise TypeError(f"expected every token to be a str, got {bad[0]}")
    if len(tokens) != length:
        raise ValueError(f"expected {length} tokens (one per attention position L={length}), got {len(tokens)}")
    return list(tokens)


def check_decimals(decimals, allow_none: bool = False) -> None:
    """``decimals`` must be an int >= 0 (or None where ``allow_none``)."""
    if decimals is None and allow_none:
        return
    if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
        raise ValueError(f"expected decimals as an int >= 0{' or None' if allow_none else ''}, got {decimals!r}")


# --- text and data inside HTML --------------------------------------------------------------------


def script_json(value) -> str:
    """JSON that is also safe inside an HTML ``<script>``: ``<``, ``>``, ``&``, U+2028/9 as ``\\u`` escapes.

    No string can close the script element or start a comment, and the text is valid JavaScript
    even where U+2028/9 end a line (older engines). NaN and infinities are refused.
    """
    text = json.dumps(value, ensure_ascii=True, allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _JSON_ESCAPES[m.group()], text)


def escape_text(text: str) -> str:
    """Text for HTML: escaped, and the JavaScript line separators U+2028/9 as character references."""
    return html_text.escape(text).replace("\u2028", "&#x2028;").replace("\u2029", "&#x2029;")


def replace_once(pattern: re.Pattern, replacement: str, text: str) -> str:
    """``text`` with the one match of ``pattern`` replaced (literally), or an error naming the BertViz version."""
    new, count = pattern.subn(lambda _: replacement, text, count=1)
    if count != 1:
        raise RuntimeError(f"expected bertviz==1.4.1 output containing {pattern.pattern!r} once, got {count} "
                           f"(bertviz {version('bertviz')} installed?)")
    return new


# --- the shipped JavaScript -----------------------------------------------------------------------


def javascript(name: str) -> str:
    """The text of ``attnlib/views/js/<name>`` (package data), e.g. ``javascript("access.js")``."""
    path = files("attnlib.views") / "js" / name
    if not path.is_file():
        raise FileNotFoundError(f"expected {name} among attnlib's JavaScript files (attnlib/views/js/), got none")
    return path.read_text(encoding="utf-8")


def library_source(name: str) -> str:
    """The source of library ``name`` ('d3' or 'jquery'), exactly as npm ships it."""
    if name not in LIBRARY_FILES:
        raise ValueError(f"expected a library name in {tuple(LIBRARY_FILES)}, got {name!r}")
    return javascript(LIBRARY_FILES[name])


def global_script(name: str) -> str:
    """The source of ``name`` wrapped so that it sets its window global (``d3``, ``jQuery``).

    A UMD bundle inlined on a page that already has require.js calls the anonymous ``define()``
    instead (require.js then raises "Mismatched anonymous define()"); hiding ``define``, ``module``
    and ``exports`` makes it take its browser-global branch in every context.
    """
    source = library_source(name)
    if "</script" in source.lower() or "<!--" in source:
        raise ValueError(f"expected {name} source without '</script' or '<!--' (it is inlined in a <script>), got one")
    return f"(function (define, module, exports) {{\n{source}\n}}).call(window);"


def libraries_script() -> str:
    """``<script>`` that evaluates d3 and jQuery once per page into ``window.attnlibBertviz``.

    The page's own ``window.d3``, ``$`` and ``jQuery`` (if any) are restored afterwards.
    """
    d3_js, jquery_js = global_script("d3"), global_script("jquery")  # checked: safe inline
    return (f'<script {VENDORED_ATTRIBUTE}="{" ".join(LIBRARY_FILES)}">\n(function () {{\n'
            f'if (window.{GLOBAL}) {{ return; }}\n'
            f'var hadD3 = "d3" in window, pageD3 = window.d3;\n'
            f'{d3_js}\n{jquery_js}\n'
            f'var libs = {{ d3: window.d3, $: window.jQuery.noConflict(true) }};\n'
            f'if (hadD3) {{ window.d3 = pageD3; }} else {{ delete window.d3; }}\n'
            f'window.{GLOBAL} = libs;\n}})();\n</script>\n')


def runner(root_id: str, kind: str) -> str:
    """What replaces BertViz's ``requirejs(['jquery', 'd3'], function ($, d3) {``: the same open function,
    called once the libraries exist, then given keyboard, names and fit (``access.js``; ``runner.js``)."""
    return (f"{javascript('access.js')}\n{javascript('runner.js')}\n"
            f"attnlibRun({script_json(root_id)}, {script_json(kind)}, function ($, d3) {{")


# --- state of this kernel -------------------------------------------------------------------------


def want_libraries(include_libraries: bool | None) -> bool:
    """None: inline the libraries only with this kernel's first view (one copy per executed page)."""
    include = not _sent["libraries"] if include_libraries is None else bool(include_libraries)
    _sent["libraries"] = _sent["libraries"] or include
    return include


def view_id(kind: str, params: dict) -> str:
    """``attnlib-<kind>-<digest of params>-<counter>``: the same data gives the same id, apart from the counter."""
    digest = hashlib.sha256(script_json(params).encode()).hexdigest()[:12]
    return f"attnlib-{kind}-{digest}-{next(_ids)}"
