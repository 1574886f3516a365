"""BertViz's head view and model view, rewritten to work offline and to treat tokens as data.

BertViz (``bertviz==1.4.1``, Vig 2019) draws attention with d3 and jQuery that it loads through
require.js from cdnjs; with no network it shows an empty box. ``head_view`` and ``model_view`` call
BertViz itself (``html_action="return"``) and rewrite the HTML it returns:

* the require.js ``<script src=...cdnjs...>`` and the ``require.config`` paths are removed; d3 5.7.0
  and jQuery 2.x are inlined from the copies attnlib ships (``attnlib.views.html``), evaluated once per page
  into a private ``window.attnlibBertviz`` (the page's own ``$``/``d3`` are restored);
* BertViz's ``requirejs(['jquery', 'd3'], ...)`` becomes a call that waits for those libraries;
* the parameters (tokens and weights) are written as JSON in which ``<``, ``>``, ``&``, U+2028 and
  U+2029 are ``\\u`` escapes, so no token can close the ``<script>``; BertViz's d3 code puts tokens
  on the page with ``.text()``, never as markup;
* the random ``uuid`` element id becomes a deterministic one, and weights are rounded, so the output
  of an executed notebook is the same on every run and every device.

For every reader, the output also carries:

* a text alternative: a collapsed ``<details>`` table of the strongest weights (``text_alternative``);
* keyboard operation: the head view's head toggles and the model view's thumbnails get a roving
  focus (Tab reaches the group, arrow keys move, Enter or Space toggles or enlarges, Escape closes
  an enlarged head), names and states for screen readers; the layer menu gets a label;
* a fit to the column: the model view's SVG (970 px wide in BertViz) scales to the width it is given,
  on a phone and in print.

Both run once BertViz has drawn: ``attnlib/views/js/access.js`` and ``runner.js``.

The same HTML works in JupyterLab, Jupyter Notebook and the built website.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import bertviz
import torch
from bertviz.util import format_special_chars
from IPython.display import HTML

from attnlib.views import colours as views_colours
from attnlib.views import html as views_html
from attnlib.views.html import escape_text, script_json

_PARAMS = "const params = "
_SCHEME = re.compile(r"d3\.schemeCategory10")  # the head view's head colours, the model view's layer colours


# --- the data -------------------------------------------------------------------------------------


def format_attention(attention, tokens, decimals: int = 2) -> tuple[torch.Tensor, list[str]]:
    """Check and stack per-layer attention: a list of (1, H, L, L) or (H, L, L) -> (N, H, L, L) float64.

    ``attention`` is what ``output_attentions=True`` or ``attnlib.models.attention_from_weights``
    returns for one sequence (torch tensors or NumPy arrays); ``tokens`` has one string per
    position. Weights are rounded to ``decimals`` so that the page is small and device-independent.
    """
    views_html.check_decimals(decimals)
    stacked = views_html.stack_layers("attention", attention, "L")  # (N, H, L, L)
    return torch.round(stacked, decimals=decimals), views_html.check_tokens(tokens, stacked.shape[-1])


# --- the text alternative ------------------------------------------------------------------------


def _strongest(head: torch.Tensor, tokens: list[str], count: int) -> str:
    """The ``count`` largest weights of one head (L, L) as "query → key 0.61" items."""
    values, flat = torch.topk(head.flatten(), min(count, head.numel()))
    length = head.shape[-1]
    return "; ".join(f"{tokens[int(i) // length]} → {tokens[int(i) % length]} {v:.2f}"
                     for v, i in zip(values.tolist(), flat.tolist(), strict=True))


def _preferred(row: torch.Tensor, tokens: list[str]) -> str:
    """The key(s) one row of rounded weights (L,) weights most: "cat 0.92", ties as "cat, mat 0.45 each",
    a row with every key tied as "all equally 0.17". Ties are equal weights at the rounded, shown precision."""
    top = torch.nonzero(row == row.max()).flatten().tolist()
    weight = f"{row.max().item():.2f}"
    if len(top) == 1:
        return f"{tokens[top[0]]} {weight}"
    if len(top) == len(tokens):
        return f"all equally {weight}"
    return f"{', '.join(tokens[k] for k in top)} {weight} each"


def _head_table(weights: torch.Tensor, tokens: list[str], layer: int, heads: list[int]) -> str:
    """Rows: query tokens; columns: heads; cell: the key each query weights most (ties listed), and the weight."""
    esc = escape_text
    header = "".join(f'<th scope="col">head {h}</th>' for h in heads)
    rows = []
    for q, token in enumerate(tokens):
        cells = []
        for h in heads:
            cells.append(f"<td>{esc(_preferred(weights[layer, h, q], tokens))}</td>")
        rows.append(f'<tr><th scope="row">{esc(token)}</th>{"".join(cells)}</tr>')
    caption = f"Layer {layer}: the key each query token weights most, per head"
    return (f"<table><caption>{esc(caption)}</caption><tr><th scope=\"col\">query</th>{header}</tr>"
            f"{''.join(rows)}</table>")


def _model_table(weights: torch.Tensor, tokens: list[str], count: int = 3) -> str:
    """Rows: (layer, head); cell: that head's ``count`` strongest query → key weights."""
    esc = escape_text
    rows = [f'<tr><th scope="row">layer {n}, head {h}</th><td>{esc(_strongest(weights[n, h], tokens, count))}</td></tr>'
            for n in range(weights.shape[0]) for h in range(weights.shape[1])]
    return ('<table><caption>The strongest weights of every head (query → key, weight)</caption>'
            '<tr><th scope="col">head</th><th scope="col">strongest weights</th></tr>'
            f"{''.join(rows)}</table>")


def text_alternative(weights: torch.Tensor, tokens: list[str], kind: str, layer: int | None = None,
                     heads: Sequence[int] | None = None) -> str:
    """A collapsed ``<details>`` with what the view draws, as a table a screen reader can read.

    ``weights`` (N, H, L, L) as ``format_attention`` returns them. Head view (``kind="head"``): for the
    layer shown first, the key each query weights most in each shown head (keys tied at the shown precision
    are listed together, a uniform row as "all equally", never one of them as a preference). Model view: the three
    strongest weights of every head. Tokens are escaped text.
    """
    if kind == "head":
        shown = list(range(weights.shape[1])) if heads is None else list(heads)
        table = _head_table(weights, tokens, 0 if layer is None else layer, shown)
    else:
        table = _model_table(weights, tokens)
    return (f'<details class="attnlib-view-text"><summary>Attention as text (a table)</summary>'
            f'<div style="overflow-x:auto">{table}</div></details>')


# --- the rewrite of BertViz's HTML ----------------------------------------------------------------


def _split_params(html: str) -> tuple[str, dict, str]:
    """Cut BertViz's ``const params = {...}; // HACK ...`` line out: (before, params, after)."""
    start = html.find(_PARAMS)
    if start < 0:
        raise RuntimeError("expected BertViz output with 'const params = ', got none (another BertViz version?)")
    params, _ = json.JSONDecoder().raw_decode(html, start + len(_PARAMS))
    end = html.index("\n", start)  # the line also repeats the JSON in a comment: drop it all
    return html[:start], params, html[end:]


def _rewrite(html: str, kind: str, tokens: list[str], include_libraries: bool, colours: list[str] | None) -> str:
    """BertViz's HTML (made with placeholder tokens) -> offline HTML with the real tokens as safe JSON.

    Every rewrite happens on BertViz's own text before and after the params line; the tokens enter last,
    as escaped JSON, so no token can take part in a rewrite.
    """
    before, params, after = _split_params(html)
    shown = format_special_chars(tokens)  # what BertViz's prettify_tokens does
    for entry in params["attention"]:
        entry["left_text"], entry["right_text"] = shown, shown
    params["root_div_id"] = ""  # BertViz's random uuid: keep it out of the digest
    root_id = views_html.view_id(kind, params)
    params["root_div_id"] = root_id
    before = views_html.replace_once(views_html.UUID_ID, root_id, before)  # the <div id=...>
    before = views_html.replace_once(views_html.CDN_REQUIRE, "", before)
    before = views_html.replace_once(views_html.REQUIRE_CONFIG, "", before)
    before = views_html.replace_once(views_html.REQUIRE_CALL, views_html.runner(root_id, kind), before)
    if colours is not None:
        cycled = [colours[i % len(colours)] for i in range(max(10, len(colours)))]  # the model view indexes % 10
        after = views_html.replace_once(_SCHEME, script_json(cycled), after)  # BertViz's code after the params
    script = before.index("<script")
    libraries = views_html.libraries_script() if include_libraries else ""
    return before[:script] + libraries + before[script:] + _PARAMS + script_json(params) + ";" + after


def _view(kind: str, draw, attention, tokens, include_libraries, decimals: int, colours, **options) -> HTML:
    weights, tokens = format_attention(attention, tokens, decimals)
    colours = None if colours is None else views_colours.check_colours(colours)
    placeholders = [f"t{i}" for i in range(len(tokens))]  # BertViz never sees the real tokens
    raw = draw(attention=list(weights[:, None]), tokens=placeholders, html_action="return", **options)
    html = _rewrite(raw.data, kind, tokens, views_html.want_libraries(include_libraries), colours)
    return HTML(html + text_alternative(weights, tokens, kind, options.get("layer"), options.get("heads")))


def head_view(attention, tokens, *, layer: int | None = None, heads: Sequence[int] | None = None,
              include_libraries: bool | None = None, decimals: int = 2,
              colours: Sequence[str] | None = None) -> HTML:
    """BertViz's head view (one layer, lines from each token to those it attends to), offline.

    ``attention``: a list with one (1, H, L, L) or (H, L, L) tensor/array per layer; ``tokens``: L
    strings. ``layer``/``heads``: what is selected at first. ``include_libraries``: inline d3 and
    jQuery (about 320 kB) in this output; ``None`` does it for the first view of the kernel only.
    ``decimals``: the weights are rounded to this many decimals (small pages, same output on every
    device). ``colours``: the head colours as ``'#rrggbb'`` strings, head h gets ``colours[h % len(colours)]``;
    ``None`` keeps BertViz's d3 ``schemeCategory10`` (``attnlib.views.colours`` measures both; ``OKABE_ITO``
    stays apart for dichromats). Returns an ``IPython.display.HTML`` (``.data`` is the HTML).
    """
    options = {"layer": layer, "heads": None if heads is None else list(heads)}
    return _view("head", bertviz.head_view, attention, tokens, include_libraries, decimals, colours, **options)


def model_view(attention, tokens, *, display_mode: str = "light",
               include_libraries: bool | None = None, decimals: int = 2,
               colours: Sequence[str] | None = None) -> HTML:
    """BertViz's model view (a thumbnail per layer and head; click one to enlarge), offline.

    Same ``attention``, ``tokens`` and ``include_libraries`` as ``head_view``; ``display_mode`` is
    ``"light"`` or ``"dark"``; ``colours`` as in ``head_view``, one per layer (layer n gets
    ``colours[n % len(colours)]``). Returns an ``IPython.display.HTML``.
    """
    if display_mode not in ("light", "dark"):
        raise ValueError(f"expected display_mode 'light' or 'dark', got {display_mode!r}")
    return _view("model", bertviz.model_view, attention, tokens, include_libraries, decimals, colours,
                 display_mode=display_mode)
