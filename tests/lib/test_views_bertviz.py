"""attnlib.views.bertviz: BertViz's views offline, with tokens as data.

Static checks read the HTML (no network URL, one safe JSON blob, tokens escaped); the browser tests
(marked ``browser``) open it in headless Chromium and check that hostile tokens show as text and
never run, that BertViz draws its SVG, and that the page makes no request.
"""

from __future__ import annotations

import itertools
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
import torch
from IPython.display import HTML

from attnlib.views import bertviz as bv
from attnlib.views import html as views_html
from tests import browser_utils as bu

HOSTILE = [
    "[CLS]",
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<!--",
    "a\u2028b\u2029c",
    "&amp;",
    "[SEP]",
]
# http(s) strings that are identifiers or comments, never fetched: d3's XML namespace URIs, d3's
# banner comment and the "Based on" comment at the top of BertViz's own JS.
NOT_FETCHED = {
    "http://www.w3.org/1999/xhtml",
    "http://www.w3.org/1999/xlink",
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/2000/xmlns/",
    "http://www.w3.org/XML/1998/namespace",
    "https://d3js.org",
    "https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/visualization/attention.js",
}
NAMESPACES = {url for url in NOT_FETCHED if url.startswith("http://www.w3.org/")}


def requirejs_tag() -> str:
    """require.js from npm (the site serves it) in a <script>: a page like classic Notebook's or a widget page."""
    source = (bu.REPO / "node_modules" / "requirejs" / "require.js").read_text(encoding="utf-8")
    return f'<script data-vendored="require">\n{source}\n</script>'


def attention(layers=2, heads=3, length=None, seed=0, batch_dim=True):
    length = len(HOSTILE) if length is None else length
    generator = torch.Generator().manual_seed(seed)
    shape = (1, heads, length, length) if batch_dim else (heads, length, length)
    return [torch.softmax(torch.randn(*shape, generator=generator), dim=-1) for _ in range(layers)]


class Scripts(HTMLParser):
    """Collects the text of every <script> element as a browser's HTML parser splits them."""

    def __init__(self):
        super().__init__()
        self.scripts, self._inside = [], False

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._inside = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._inside = False

    def handle_data(self, data):
        if self._inside:
            self.scripts[-1] += data


def scripts_of(html: str) -> list[str]:
    parser = Scripts()
    parser.feed(html)
    return parser.scripts


def params_of(html: str) -> dict:
    start = html.index(bv._PARAMS) + len(bv._PARAMS)
    return json.JSONDecoder().raw_decode(html, start)[0]


@pytest.fixture(params=["head", "model"])
def view(request):
    return {"head": bv.head_view, "model": bv.model_view}[request.param]


# --- what the HTML contains ----------------------------------------------------------------------


def test_returns_displayable_html(view):
    out = view(attention(), HOSTILE, include_libraries=True)
    assert isinstance(out, HTML)
    assert isinstance(out.data, str) and out._repr_html_() == out.data
    assert re.search(r'<div id="attnlib-(head|model)-[0-9a-f]{12}-\d+"', out.data)


def test_no_network_url(view):
    html = view(attention(), HOSTILE, include_libraries=True).data
    assert "cdnjs" not in html
    assert "require.config" not in html and "requirejs(" not in html
    assert not re.search(r"""\b(src|href)\s*=\s*["']?[a-z]+:""", html, re.IGNORECASE)
    urls = set(re.findall(r"""https?://[^\s"'<>)]*""", html))
    assert urls <= NOT_FETCHED, urls - NOT_FETCHED
    for line in html.splitlines():  # the other two only ever occur in JavaScript comment lines
        if any(url in line for url in NOT_FETCHED - NAMESPACES):
            assert line.lstrip().startswith(("//", "*")), line[:100]


def test_libraries_are_the_vendored_npm_copies(view):
    html = view(attention(), HOSTILE, include_libraries=True).data
    for name in ("d3", "jquery"):
        assert views_html.library_source(name) in html
    assert html.count("jQuery v2.2.4") == 1 and html.count("d3js.org v5.7.0") == 1


def test_hostile_tokens_stay_inside_the_json(view):
    html = view(attention(), HOSTILE, include_libraries=False).data
    assert "</script><script>alert" not in html
    assert "<img src=x" not in html and "<!--" not in html
    assert "\u2028" not in html and "\u2029" not in html
    assert "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in html
    assert "\\u003cimg src=x onerror=alert(1)\\u003e" in html
    assert "\\u0026amp;" in html and "a\\u2028b\\u2029c" in html
    scripts = scripts_of(html)
    assert len(scripts) == 1  # no token closed the script or opened another
    assert bv._PARAMS in scripts[0] and scripts[0].rstrip().endswith("});")


def test_json_carries_the_tokens_and_rounded_weights(view):
    weights = attention()
    params = params_of(view(weights, HOSTILE, include_libraries=False).data)
    entry = params["attention"][0]
    assert entry["left_text"] == HOSTILE and entry["right_text"] == HOSTILE
    expected = torch.stack([w[0] for w in weights]).double()
    got = torch.tensor(entry["attn"], dtype=torch.float64)
    torch.testing.assert_close(got, expected, atol=5e-3 + 1e-12, rtol=0)  # rounded to 2 decimals by default
    assert torch.equal(got, torch.round(got, decimals=2))
    finer = params_of(view(weights, HOSTILE, include_libraries=False, decimals=4).data)["attention"][0]["attn"]
    torch.testing.assert_close(torch.tensor(finer, dtype=torch.float64), expected, atol=5e-5 + 1e-12, rtol=0)


def test_wordpiece_markers_are_prettified_like_bertviz():
    params = params_of(bv.head_view(attention(length=3), ["Ġthe", "▁cat", "sat</w>"], include_libraries=False).data)
    assert params["attention"][0]["left_text"] == [" the", " cat", "sat"]


def test_one_script_element_per_part():
    html = bv.head_view(attention(), HOSTILE, include_libraries=True).data
    scripts = scripts_of(html)
    assert len(scripts) == 2
    assert "window.attnlibBertviz" in scripts[0] and bv._PARAMS in scripts[1]


def test_libraries_inlined_once_per_kernel_unless_asked(monkeypatch):
    monkeypatch.setattr(views_html, "_sent", {"libraries": False})
    first, second = (bv.head_view(attention(), HOSTILE).data, bv.model_view(attention(), HOSTILE).data)
    assert "data-vendored" in first and "data-vendored" not in second
    assert "data-vendored" in bv.model_view(attention(), HOSTILE, include_libraries=True).data
    assert len(second) < 50_000 < len(first)


def test_output_is_deterministic(monkeypatch):
    outputs = []
    for _ in range(2):
        monkeypatch.setattr(views_html, "_ids", itertools.count())
        outputs.append(bv.head_view(attention(), HOSTILE, include_libraries=True).data)
    assert outputs[0] == outputs[1]
    assert "bertviz-" not in outputs[0]  # BertViz's random uuid id is gone


def test_two_views_get_different_ids():
    a = bv.head_view(attention(), HOSTILE, include_libraries=False).data
    b = bv.head_view(attention(), HOSTILE, include_libraries=False).data
    assert params_of(a)["root_div_id"] != params_of(b)["root_div_id"]


@pytest.mark.parametrize("convert", [
    lambda w: w,  # (1, H, L, L) tensors as transformers returns them
    lambda w: [x[0] for x in w],  # (H, L, L)
    lambda w: [x.numpy() for x in w],  # NumPy
    lambda w: tuple(x.to(torch.bfloat16).requires_grad_() for x in w),  # a tuple, another dtype, with grad
])
def test_accepts_torch_numpy_with_or_without_batch_dim(convert):
    weights = attention()
    params = params_of(bv.model_view(convert(weights), HOSTILE, include_libraries=False).data)
    got = np.array(params["attention"][0]["attn"])
    assert got.shape == (2, 3, len(HOSTILE), len(HOSTILE))
    np.testing.assert_allclose(got, torch.stack([w[0] for w in weights]).numpy(), atol=1e-2)  # bf16 + rounding


def test_accepts_transformers_output_attentions():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=16)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    with torch.no_grad():
        out = model(torch.tensor([[1, 2, 3, 4]]), output_attentions=True)
    params = params_of(bv.head_view(out.attentions, list("abcd"), layer=1, heads=[0], include_libraries=False).data)
    assert params["layer"] == 1 and params["heads"] == [0]
    assert np.array(params["attention"][0]["attn"]).shape == (2, 2, 4, 4)


def test_model_view_display_modes():
    assert params_of(bv.model_view(attention(), HOSTILE, include_libraries=False).data)["display_mode"] == "light"
    dark = bv.model_view(attention(), HOSTILE, display_mode="dark", include_libraries=False).data
    assert params_of(dark)["display_mode"] == "dark"
    with pytest.raises(ValueError, match="expected display_mode 'light' or 'dark', got 'blue'"):
        bv.model_view(attention(), HOSTILE, display_mode="blue")


# --- errors ---------------------------------------------------------------------------------------


def test_rejects_tokens_of_another_length(view):
    with pytest.raises(ValueError, match=r"expected 7 tokens \(one per attention position L=7\), got 6"):
        view(attention(), HOSTILE[:-1])


def test_rejects_tokens_that_are_not_a_list_of_str(view):
    with pytest.raises(TypeError, match="expected tokens as a list of 7 strings, got str"):
        view(attention(), "abcdefg")
    with pytest.raises(TypeError, match="expected every token to be a str, got int"):
        view(attention(), [1, 2, 3, 4, 5, 6, 7])


def test_rejects_ragged_layers(view):
    layers = attention(layers=1) + attention(layers=1, length=6)
    with pytest.raises(ValueError, match=r"expected every attention layer of shape \(H, L, L\) = \(3, 7, 7\) like "
                                         r"layer 0, got \(3, 6, 6\) at layer 1"):
        view(layers, HOSTILE)
    with pytest.raises(ValueError, match="like layer 0, got \\(2, 7, 7\\) at layer 1"):
        view(attention(layers=1) + attention(layers=1, heads=2), HOSTILE)


@pytest.mark.parametrize("shape", [(7, 7), (2, 1, 3, 7, 7), (2, 3, 7, 7), (3, 7, 6)])
def test_rejects_layers_of_the_wrong_rank_or_shape(view, shape):
    with pytest.raises(ValueError, match=rf"expected attention layer 0 of shape \(1, H, L, L\) or \(H, L, L\).*got "
                                         rf"{re.escape(str(shape))}"):
        view([torch.rand(shape)], HOSTILE)


def test_rejects_attention_that_is_not_a_list_of_layers(view):
    with pytest.raises(TypeError, match="expected attention as a list with one .* per layer, got Tensor"):
        view(torch.rand(2, 3, 7, 7), HOSTILE)
    with pytest.raises(ValueError, match="expected attention for at least one layer, got an empty list"):
        view([], HOSTILE)
    with pytest.raises(TypeError, match="expected attention layer 0 as a torch.Tensor or numpy.ndarray .* got list"):
        view([[[0.5]]], ["a"])


@pytest.mark.parametrize("decimals", [-1, 2.5, True])
def test_rejects_bad_decimals(view, decimals):
    with pytest.raises(ValueError, match="expected decimals as an int >= 0"):
        view(attention(), HOSTILE, decimals=decimals)


def test_rejects_non_finite_weights(view):
    weights = attention()
    weights[1][0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="expected finite attention, got NaN or inf"):
        view(weights, HOSTILE)


# --- in a real browser ----------------------------------------------------------------------------

# Make alert() observable instead of blocking, before any script of the page runs.
def open_page(browser, tmp_path, body: str):
    page = tmp_path / "page.html"
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>",
                    encoding="utf-8")
    browser.get_log("browser"), browser.get_log("performance")  # drop what earlier pages logged
    browser.get(page.as_uri())
    browser.implicitly_wait(0)
    for _ in range(100):  # wait until every view has drawn its SVG
        if browser.execute_script("return document.querySelectorAll('svg text').length") > 0:
            break
        browser.execute_script("return new Promise(r => setTimeout(r, 50))")
    return page


def requested_urls(browser) -> list[str]:
    return [r.url for r in bu.network_requests(bu.performance_messages(browser))]


def svg_texts(browser, root_id: str) -> list[str]:
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('#' + arguments[0] + ' svg text')).map(t => t.textContent)",
        root_id)


@pytest.mark.browser
@pytest.mark.parametrize("with_requirejs", [False, True], ids=["plain-page", "page-with-requirejs"])
def test_browser_renders_hostile_tokens_as_text(browser, tmp_path, with_requirejs):
    head = bv.head_view(attention(), HOSTILE, include_libraries=True).data
    model = bv.model_view(attention(), HOSTILE, include_libraries=False).data
    prefix = requirejs_tag() if with_requirejs else ""  # like classic Notebook or a widget page
    page = open_page(browser, tmp_path, prefix + head + model)

    assert browser.execute_script("return window.__alerts") == []
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    model_id = params_of(model)["root_div_id"]
    # the model view shows tokens once a thumbnail is clicked: click layer 0, head 0
    browser.execute_script("Array.from(document.querySelectorAll('#' + arguments[0] + ' svg rect'))"
                           ".find(r => r.style.opacity === '0')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", model_id)
    for root in (params_of(head)["root_div_id"], model_id):
        texts = svg_texts(browser, root)
        for token in HOSTILE:
            assert token in texts, (root, token, texts)
    head_id = params_of(head)["root_div_id"]
    assert browser.execute_script(f"return document.querySelectorAll('#{head_id} svg line').length") > 0
    assert bu.console_errors(browser) == []
    assert requested_urls(browser) == [page.as_uri()]
    # the page's own globals are left alone; BertViz's libraries live in window.attnlibBertviz
    assert browser.execute_script("return [typeof window.d3, typeof window.jQuery, "
                                  "window.attnlibBertviz.d3.version]") == ["undefined", "undefined", "5.7.0"]


@pytest.mark.browser
def test_browser_view_without_libraries_says_why(browser, tmp_path):
    html = bv.head_view(attention(), HOSTILE, include_libraries=False).data
    open_page(browser, tmp_path, html)
    root = params_of(html)["root_div_id"]
    browser.execute_script("return new Promise(r => setTimeout(r, 2500))")
    text = browser.execute_script(f"return document.getElementById('{root}').textContent")
    assert "include_libraries=True" in text
    assert browser.execute_script("return document.querySelectorAll('svg').length") == 0
    # once another output brings the libraries, the view draws itself and the note goes
    libraries = views_html.libraries_script().split(">", 1)[1].rsplit("</script>", 1)[0]
    browser.execute_script(libraries)
    browser.execute_script("return new Promise(r => setTimeout(r, 600))")
    assert "include_libraries=True" not in browser.execute_script(
        f"return document.getElementById('{root}').textContent")
    assert browser.execute_script("return document.querySelectorAll('svg line').length") > 0


# --- for every reader: a text alternative, the keyboard, the column's width --------------------------------


def designed(layers=2, heads=3, length=4):
    """Head h of layer n sends 0.85 of each query's weight to key (query + h + n) mod L: a known answer."""
    out = []
    for n in range(layers):
        layer = torch.full((heads, length, length), 0.15 / (length - 1), dtype=torch.float64)
        for h in range(heads):
            for q in range(length):
                layer[h, q, (q + h + n) % length] = 0.85
        out.append(layer[None])
    return out


def test_head_view_text_alternative_names_each_querys_strongest_key():
    tokens = ["<b>", "cat", "sat", "a\u2028b"]
    html = bv.head_view(designed(), tokens, layer=1, heads=[0, 2], include_libraries=False).data
    table = html[html.index('<details class="attnlib-view-text">'):]
    assert "<caption>Layer 1: the key each query token weights most, per head</caption>" in table
    assert '<th scope="col">head 0</th><th scope="col">head 2</th>' in table and "head 1</th>" not in table
    shown = ["&lt;b&gt;", "cat", "sat", "a&#x2028;b"]
    for q, token in enumerate(shown):  # layer 1: head 0 -> q + 1, head 2 -> q + 3
        cells = f"<td>{shown[(q + 1) % 4]} 0.85</td><td>{shown[(q + 3) % 4]} 0.85</td>"
        row = f'<tr><th scope="row">{token}</th>{cells}</tr>'
        assert row in table, row
    assert "<b>" not in table
    assert scripts_of(table) == []


def test_head_view_text_alternative_reports_ties_as_ties():
    # head 0: query 0 splits its weight between keys 1 and 2, query 1 spreads it evenly, query 2 prefers key 0;
    # head 1: 0.444 and 0.436 round to the same shown 0.44, a tie at the table's precision
    head0 = [[0.1, 0.45, 0.45], [1 / 3, 1 / 3, 1 / 3], [0.8, 0.1, 0.1]]
    head1 = [[0.444, 0.436, 0.12], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]
    tokens = ["a", "<b>", "c"]
    html = bv.head_view([torch.tensor([head0, head1], dtype=torch.float64)], tokens, include_libraries=False).data
    table = html[html.index('<details class="attnlib-view-text">'):]
    rows = {tokens[q]: f'<tr><th scope="row">{views_html.escape_text(tokens[q])}</th>{cells}</tr>' for q, cells in (
        (0, "<td>&lt;b&gt;, c 0.45 each</td><td>a, &lt;b&gt; 0.44 each</td>"),
        (1, "<td>all equally 0.33</td><td>c 0.50</td>"),
        (2, "<td>a 0.80</td><td>a 0.60</td>"))}
    for token, row in rows.items():
        assert row in table, (token, table)


def test_model_view_text_alternative_lists_every_heads_strongest_weights():
    tokens = ["w", "x", "y", "z"]
    html = bv.model_view(designed(layers=2, heads=3), tokens, include_libraries=False).data
    table = html[html.index('<details class="attnlib-view-text">'):]
    assert table.count('<th scope="row">layer ') == 2 * 3
    row = table[table.index("layer 1, head 2</th>"):].split("</tr>")[0]
    # layer 1, head 2: query q -> key (q + 3) mod 4, weight 0.85, three of them listed
    assert row.count(" 0.85") == 3 and "w → z 0.85" in row and "x → w 0.85" in row


def test_views_carry_their_keyboard_and_fit_code():
    head = bv.head_view(designed(), list("wxyz"), include_libraries=False).data
    model = bv.model_view(designed(), list("wxyz"), include_libraries=False).data
    for html, kind in ((head, "head"), (model, "model")):
        script = scripts_of(html)[0]
        assert "'aria-label', 'Layer'" in script and "viewBox" in script
        assert views_html.javascript("access.js") in script and views_html.javascript("runner.js") in script
        assert f'attnlibRun("{params_of(html)["root_div_id"]}", "{kind}", function ($, d3) {{' in script


KEY_STATE = """
const root = document.getElementById(arguments[0]);
const e = document.activeElement;
return {role: e.getAttribute('role'), label: e.getAttribute('aria-label'), inside: root.contains(e),
        switches: Array.from(root.querySelectorAll('[role="switch"]')).map(s => s.getAttribute('aria-checked')),
        lines: Array.from(root.querySelectorAll('svg line'))
                 .filter(l => parseFloat(l.getAttribute('stroke-opacity')) > 0).length,
        details: root.querySelectorAll('.detail').length,
        select: (root.querySelector('select#layer') || {getAttribute: () => null}).getAttribute('aria-label')};
"""


def _keys(browser, *keys):
    from selenium.webdriver.common.action_chains import ActionChains  # noqa: PLC0415

    ActionChains(browser).send_keys(*keys).perform()


@pytest.mark.browser
def test_browser_head_toggles_work_by_keyboard(browser, tmp_path):
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    html = bv.head_view(designed(), list("wxyz"), include_libraries=True).data
    open_page(browser, tmp_path, html)
    root = params_of(html)["root_div_id"]
    state = browser.execute_script(KEY_STATE, root)
    assert state["select"] == "Layer" and state["switches"] == ["true"] * 3
    _keys(browser, Keys.TAB)  # the layer menu
    _keys(browser, Keys.TAB)  # the group of head toggles (one tab stop)
    state = browser.execute_script(KEY_STATE, root)
    assert state["inside"] and state["role"] == "switch" and state["label"] == "head 0", state
    _keys(browser, Keys.ARROW_RIGHT)
    assert browser.execute_script(KEY_STATE, root)["label"] == "head 1"
    lines = state["lines"]
    _keys(browser, Keys.SPACE)
    state = browser.execute_script(KEY_STATE, root)
    assert state["switches"] == ["true", "false", "true"] and state["label"] == "head 1", state
    assert state["lines"] < lines  # head 1's lines are hidden
    _keys(browser, Keys.ENTER)
    assert browser.execute_script(KEY_STATE, root)["switches"] == ["true"] * 3


@pytest.mark.browser
def test_browser_model_view_by_keyboard_and_fits_a_phone(browser, tmp_path):
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    html = bv.model_view(designed(layers=2, heads=12), list("wxyz"), include_libraries=True).data
    browser.set_window_size(390, 800)
    try:
        open_page(browser, tmp_path, f'<div style="max-width:360px">{html}</div>')
        root = params_of(html)["root_div_id"]
        width = browser.execute_script(
            "return document.querySelector('#' + arguments[0] + ' svg').getBoundingClientRect().width", root)
        assert 0 < width <= 360, f"the model view is {width} px wide in a 360 px column"
        _keys(browser, Keys.TAB)
        state = browser.execute_script(KEY_STATE, root)
        assert state["role"] == "button" and state["label"] == "layer 0, head 0: enlarge", state
        _keys(browser, Keys.ARROW_DOWN)
        assert browser.execute_script(KEY_STATE, root)["label"] == "layer 1, head 0: enlarge"
        _keys(browser, Keys.ARROW_RIGHT)
        assert browser.execute_script(KEY_STATE, root)["label"] == "layer 1, head 1: enlarge"
        _keys(browser, Keys.ENTER)
        state = browser.execute_script(KEY_STATE, root)
        assert state["details"] > 0 and state["label"] == "layer 1, head 1: enlarge", state
        _keys(browser, Keys.SPACE)
        assert browser.execute_script(KEY_STATE, root)["details"] == 0
    finally:
        browser.set_window_size(1280, 900)


# --- colours: a palette option, and the website's linked libraries ------------------------------------------


def test_colours_replace_bertvizs_scheme_cycled_to_ten(view):
    html = view(attention(), HOSTILE, include_libraries=False, colours=["#000000", "#E69F00", "#56b4e9"]).data
    assert "d3.schemeCategory10" not in html
    cycled = ["#000000", "#e69f00", "#56b4e9"] * 3 + ["#000000"]  # the model view indexes colours % 10
    assert json.dumps(cycled) in html
    assert "d3.schemeCategory10" in view(attention(), HOSTILE, include_libraries=False).data  # default: BertViz's


@pytest.mark.parametrize("colours", [["red"], ["#12345"], [], "#000000", [None]])
def test_rejects_colours_that_are_not_hex_strings(view, colours):
    with pytest.raises((TypeError, ValueError), match="expected"):
        view(attention(), HOSTILE, include_libraries=False, colours=colours)


@pytest.mark.browser
def test_browser_head_view_draws_heads_in_the_given_colours(browser, tmp_path):
    palette = ["#000000", "#e69f00", "#56b4e9"]
    html = bv.head_view(attention(heads=3), HOSTILE, include_libraries=True, colours=palette).data
    open_page(browser, tmp_path, html)
    strokes = browser.execute_script("return Array.from(new Set(Array.from(document.querySelectorAll('svg line'))"
                                     ".map(l => l.getAttribute('stroke'))))")
    assert sorted(strokes) == sorted(palette)
    assert bu.console_errors(browser) == []


@pytest.mark.browser
def test_browser_view_draws_with_the_libraries_linked_not_inlined(browser, tmp_path):
    """What the website's build does (attnsite/vendor_assets.py): script src to copies of the same files."""
    from attnsite import site_assets, vendor_assets  # noqa: PLC0415 - the site's build side

    for name, path in views_html.LIBRARY_FILES.items():
        copy = tmp_path / site_assets.site_url(name)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(views_html.javascript(path), encoding="utf-8")
    html = bv.head_view(attention(), HOSTILE, include_libraries=True).data
    linked, count = vendor_assets.link_vendored(html, ".")
    assert count == 1 and views_html.library_source("d3")[:2000] not in linked
    open_page(browser, tmp_path, requirejs_tag() + linked)
    assert browser.execute_script("return document.querySelectorAll('svg line').length") > 0
    assert bu.console_errors(browser) == []
    kinds = browser.execute_script("return [typeof window.d3, typeof window.jQuery, typeof window.define, "
                                   "window.attnlibBertviz.d3.version]")
    assert kinds == ["undefined", "undefined", "function", "5.7.0"]
