"""BertViz's neuron view, drawn from queries and keys that attnlib computed: chapter 1's q·k inside a model.

For one layer and head, the neuron view shows every token's query and key vector (one coloured cell
per feature), the element-wise product q × k of the selected query with every key, its sum divided by
√Dk (the score of chapter 2) and the softmax weights. BertViz 1.4.1 computes it only for its own forked
model classes; ``neuron_view`` takes the tensors instead, so it works on any model whose queries and
keys attnlib can read (``attnlib.models.queries_keys_from_weights``).

The JavaScript is BertViz's own ``neuron_view.js``, read from the installed package and rewritten
like the other two views (``attnlib.views.bertviz``): no require.js or CDN (d3 and jQuery inlined from
npm), parameters as ``<script>``-safe JSON, tokens put on the page as text only, a deterministic id.
Five changes to BertViz's behaviour: the expand control is a visible ``<button>`` (BertViz's "+"
appears only while the mouse is over a token), query tokens can be reached with Tab (focus selects
them, Enter or Space expands or collapses; only the shown panel's tokens are Tab stops), each score cell
carries its number as an SVG ``<title>``, the score's heading says what is drawn, ``q · k / √d``, and the
view fits its column: BertViz draws it 1,120 px wide (three 200 px vector columns), which put q × k, the
scores and the softmax off-screen in a 672 px column; here the vector columns share the width the tokens
leave, and where even that is too wide (a phone) the drawing is scaled down to the column, its text never
below 9 px (past that it scrolls sideways in its box).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib.resources import files

import torch
from bertviz.util import format_special_chars
from IPython.display import HTML

from attnlib.scaling import scale_scores
from attnlib.scores import dot_product_scores
from attnlib.softmax import softmax
from attnlib.views import html as views_html
from attnlib.views.html import script_json

_PARAMS_LINE = "const params = window.bertviz_params"

# BertViz's text -> ours; each must occur exactly once in bertviz 1.4.1's neuron_view.js
_PATCHES = (
    # scope the one selector BertViz left page-wide (with two views on a page it drew into the first)
    ('var svg = d3.select("#vis");', "var svg = d3.select(`#${config.rootDivId} #vis`);"),
    # the score shown is divided by sqrt(d): say so
    (".text(' \\u2219 k')", ".text(' \\u2219 k / \\u221Ad')"),
    # keep the visible button in step with BertViz's own +/- icons
    ("function showCollapsed() {", "function showCollapsed() {\n            attnlibSync(false);"),
    ("function showExpanded() {", "function showExpanded() {\n            attnlibSync(true);"),
    ("renderVisCollapsed(svg, leftText, rightText, att);",
     "renderVisCollapsed(svg, leftText, rightText, att);\n            attnlibKeyboard();\n"
     "            attnlibFit(svg, height);"),
    # the layout fits its column (attnlibFit): the vectors' columns share what the tokens leave, not 200 px each,
    # and the token columns are as wide as the longest token, not 120 px
    ("const MATRIX_WIDTH = 200;", "const MATRIX_WIDTH = attnlibMatrixWidth();"),
    ("const BOXWIDTH = TEXT_SIZE * 8;", "const BOXWIDTH = attnlibBoxWidth();"),
    # headings centred over their (now narrower) columns; the score column's heading "q · k / √d" gets room
    (".attr(\"x\", posQueries + 68)", ".attr(\"x\", posQueries + MATRIX_WIDTH / 2 - 30)"),
    (".attr(\"x\", posKeys + 73)", ".attr(\"x\", posKeys + MATRIX_WIDTH / 2 - 22)"),
    (".attr(\"x\", posProduct + 28)", ".attr(\"x\", posProduct + MATRIX_WIDTH / 2 - 20)"),
    (".text('q \\u00D7 k (elementwise)')", ".text('q \\u00D7 k')"),
    ("var posRightText = posDotProduct + BOXHEIGHT + PADDING_WIDTH;",
     "var posRightText = posDotProduct + BOXHEIGHT + PADDING_WIDTH + attnlibScoreRoom();"),
    (".attr(\"x\", posProduct + 55)", ".attr(\"x\", posProduct + 4)"),
    ("updateDotProducts(svg, dotProducts);", "updateDotProducts(svg, dotProducts);\n"
     "            attnlibTitles(svg, dotProducts, att);"),
    # the layer menu shows the layers' own numbers when only some layers are passed
    ('layerSelect.append($("<option />").val(i).text(i));',
     'layerSelect.append($("<option />").val(i).text(params.layer_labels[i]));'),
)

_FONT = "font-family:'Helvetica Neue', Helvetica, Arial, sans-serif"
_HTML = """<div id="{root}" class="attnlib-neuron" style="padding:8px;{font}">
  <div style="display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center">
    <label><span class="dropdown-label">Layer: </span><select id="layer"></select></label>
    <label><span class="dropdown-label">Head: </span><select id="att_head"></select></label>
    <button type="button" class="attnlib-expand" aria-pressed="false">+ Show q, k and the scores</button>
  </div>
  <p style="margin:4px 0;font-size:13px">Point at a query token on the left, or reach it with Tab; the button
  (or Enter on the token) shows its query, every key, their element-wise product and the scores.</p>
  <div class="attnlib-neuron-scroll" style="overflow-x:auto"><div id="vis"></div></div>
</div>
"""


def neuron_data(queries, keys, tokens, decimals: int | None = 3) -> dict:
    """The neuron view's data, checked: queries, keys (rounded), attention and tokens.

    ``queries``, ``keys``: lists with one (1, H, L, Dk) or (H, L, Dk) tensor/array per layer.
    The attention ``softmax(q·k/√Dk)`` is computed by attnlib from the unrounded vectors; ``decimals``
    rounds everything that goes on the page (``None``: no rounding).
    """
    views_html.check_decimals(decimals, allow_none=True)
    q, k = views_html.stack_layers("queries", queries, "Dk"), views_html.stack_layers("keys", keys, "Dk")
    if q.shape != k.shape:
        raise ValueError(f"expected keys of shape (N, H, L, Dk) = {tuple(q.shape)} like queries (N layers), "
                         f"got {tuple(k.shape)}")
    tokens = views_html.check_tokens(tokens, q.shape[-2])
    attn = softmax(scale_scores(dot_product_scores(q, k), q.shape[-1]), dim=-1)  # (N, H, L, L)

    def rounded(t: torch.Tensor) -> torch.Tensor:
        return t if decimals is None else torch.round(t, decimals=decimals)

    return {"queries": rounded(q), "keys": rounded(k), "attn": rounded(attn), "tokens": tokens}


def _javascript(root_id: str) -> str:
    source = (files("bertviz") / "neuron_view.js").read_text(encoding="utf-8")
    source = views_html.replace_once(views_html.REQUIRE_CONFIG, "", source)
    source = views_html.replace_once(views_html.REQUIRE_CALL, views_html.runner(root_id, "head"), source)
    for old, new in _PATCHES:
        if source.count(old) != 1:
            raise RuntimeError(f"expected bertviz==1.4.1's neuron_view.js containing {old!r} once, got "
                               f"{source.count(old)}")
        source = source.replace(old, new)
    added = views_html.javascript("neuron_added.js")
    source = views_html.replace_once(re.compile(r"render\(\);\s*\}\);\s*$"), added + "\n        render();\n    });\n",
                                     source)
    if source.count(_PARAMS_LINE) != 1:
        raise RuntimeError("expected bertviz==1.4.1's neuron_view.js reading window.bertviz_params once")
    return source


def _layer_labels(labels, count: int) -> list[int]:
    if labels is None:
        return list(range(count))
    if isinstance(labels, str) or not isinstance(labels, Sequence) or len(labels) != count \
            or any(isinstance(v, bool) or not isinstance(v, int) for v in labels):
        raise ValueError(f"expected layer_labels as {count} ints (one per layer passed), got {labels!r}")
    return list(labels)


def neuron_view(queries, keys, tokens, *, layer: int = 0, head: int = 0, layer_labels: Sequence[int] | None = None,
                display_mode: str = "light", include_libraries: bool | None = None,
                decimals: int | None = 3) -> HTML:
    """BertViz's neuron view (query and key vectors, q × k, scores, softmax) for one layer and head at a time.

    ``queries`` and ``keys``: lists with one (1, H, L, Dk) or (H, L, Dk) tensor/array per layer (what
    ``attnlib.models.queries_keys_from_weights`` returns); ``tokens``: L strings. ``layer``/``head``:
    what is selected at first (``layer`` counts the layers passed). ``layer_labels``: the numbers the layer
    menu shows, one per layer passed (default 0, 1, ...): pass ``queries[2:3], keys[2:3]`` with
    ``layer_labels=[2]`` to show only layer 2 under its own number. ``display_mode``: ``"light"`` or
    ``"dark"``. ``include_libraries`` and ``decimals`` as in ``attnlib.views.bertviz.head_view`` (here
    ``decimals=None`` keeps full precision).
    The scores the view shows are ``q · k / √Dk`` of the (rounded) vectors; the softmax weights are
    attnlib's. Returns an ``IPython.display.HTML``.
    """
    if display_mode not in ("light", "dark"):
        raise ValueError(f"expected display_mode 'light' or 'dark', got {display_mode!r}")
    data = neuron_data(queries, keys, tokens, decimals)
    layers, heads = data["queries"].shape[:2]
    for name, value, count in (("layer", layer, layers), ("head", head, heads)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise ValueError(f"expected {name} in [0, {count - 1}], got {value!r}")
    shown = format_special_chars(data["tokens"])
    entry = {"attn": data["attn"].tolist(), "queries": data["queries"].tolist(), "keys": data["keys"].tolist(),
             "left_text": shown, "right_text": shown}
    params = {"attention": {"all": entry}, "default_filter": "all", "bidirectional": True,
              "display_mode": display_mode, "layer": layer, "head": head, "root_div_id": "",
              "layer_labels": _layer_labels(layer_labels, layers)}
    root_id = views_html.view_id("neuron", params)
    params["root_div_id"] = root_id
    script = _javascript(root_id).replace(_PARAMS_LINE, "const params = " + script_json(params))  # data last
    libraries = views_html.libraries_script() if views_html.want_libraries(include_libraries) else ""
    view = _HTML.format(root=root_id, font=_FONT)
    return HTML(view + libraries + f'<script type="text/javascript">\n{script}\n</script>\n')
