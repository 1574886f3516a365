"""attnlib.views.neuron: BertViz's neuron view from attnlib's queries and keys, offline, tokens as data.

Static checks read the HTML; the browser tests (marked ``browser``) open it in headless Chromium,
select query tokens with the mouse and with the keyboard, read back the scores the view displays
and compare them with attnlib's ``q · k / √Dk``, and check that the page makes no request.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from IPython.display import HTML

from attnlib import dot_product_scores, scale_scores
from attnlib.views import head_view, model_view, neuron_view
from attnlib.views import html as views_html
from attnlib.views import neuron as nv
from tests import browser_utils as bu
from tests.lib.test_views_bertviz import HOSTILE, NOT_FETCHED, scripts_of

PARAMS = re.compile(r"const params = ")



def requirejs_tag() -> str:
    """require.js from npm (the site serves it) in a <script>: a page like classic Notebook's or a widget page."""
    source = (bu.REPO / "node_modules" / "requirejs" / "require.js").read_text(encoding="utf-8")
    return f'<script data-vendored="require">\n{source}\n</script>'


def vectors(layers=2, heads=3, length=None, d_k=4, seed=0, batch_dim=True):
    length = len(HOSTILE) if length is None else length
    generator = torch.Generator().manual_seed(seed)
    shape = (1, heads, length, d_k) if batch_dim else (heads, length, d_k)
    return [2 * torch.randn(*shape, generator=generator, dtype=torch.float64) for _ in range(layers)]


def params_of(html: str) -> dict:
    start = PARAMS.search(html).end()
    return json.JSONDecoder().raw_decode(html, start)[0]


def expected_scores(queries, keys, layer, head):
    q, k = queries[layer].reshape(-1, *queries[layer].shape[-3:]), keys[layer].reshape(-1, *keys[layer].shape[-3:])
    return scale_scores(dot_product_scores(q, k), q.shape[-1])[0, head]  # (L, L)


# --- the HTML -------------------------------------------------------------------------------------


def test_the_three_views_import_from_attnlib_views():
    from attnlib.views import bertviz  # noqa: PLC0415

    assert head_view is bertviz.head_view and model_view is bertviz.model_view and neuron_view is nv.neuron_view
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        import attnlib.views  # noqa: PLC0415

        attnlib.views.nope  # noqa: B018


def test_returns_offline_html_with_tokens_only_in_safe_json():
    out = neuron_view(vectors(seed=1), vectors(seed=2), HOSTILE, include_libraries=True)
    assert isinstance(out, HTML)
    html = out.data
    assert re.search(r'<div id="attnlib-neuron-[0-9a-f]{12}-\d+"', html)
    assert "cdnjs" not in html and "require.config" not in html and "requirejs(" not in html
    assert "bertviz_params" not in html
    assert not re.search(r"""\b(src|href)\s*=\s*["']?[a-z]+:""", html, re.IGNORECASE)
    assert set(re.findall(r"""https?://[^\s"'<>)]*""", html)) <= NOT_FETCHED
    assert "<img src=x" not in html and "</script><script>alert" not in html and "<!--" not in html
    assert "\\u003cimg src=x onerror=alert(1)\\u003e" in html
    assert views_html.library_source("d3") in html and views_html.library_source("jquery") in html
    scripts = scripts_of(html)
    assert len(scripts) == 2  # the libraries, then the view: no token closed a script or opened one


def test_json_holds_rounded_vectors_and_attnlib_attention():
    queries, keys = vectors(seed=3), vectors(seed=4, batch_dim=False)
    entry = params_of(neuron_view(queries, keys, HOSTILE, include_libraries=False).data)["attention"]["all"]
    assert entry["left_text"] == HOSTILE and entry["right_text"] == HOSTILE
    q = torch.tensor(entry["queries"], dtype=torch.float64)
    assert q.shape == (2, 3, 7, 4) and torch.equal(q, torch.round(q, decimals=3))
    torch.testing.assert_close(q, torch.stack([t[0] for t in queries]), rtol=0, atol=5e-4 + 1e-12)
    for layer in range(2):
        expected = torch.softmax(expected_scores(queries, keys, layer, 0).unsqueeze(0), dim=-1)[0]
        torch.testing.assert_close(torch.tensor(entry["attn"][layer][0], dtype=torch.float64), expected,
                                   rtol=0, atol=5e-4 + 1e-12)
    exact = params_of(neuron_view(queries, keys, HOSTILE, include_libraries=False, decimals=None).data)
    assert exact["attention"]["all"]["keys"] == torch.stack(keys).tolist()


def test_accepts_numpy_and_starts_on_the_chosen_layer_and_head():
    queries = [v.numpy() for v in vectors(seed=5)]
    params = params_of(neuron_view(queries, queries, HOSTILE, layer=1, head=2, display_mode="dark").data)
    assert (params["layer"], params["head"], params["display_mode"]) == (1, 2, "dark")


def test_layer_labels_name_the_layers_passed():
    q = vectors(layers=1)
    params = params_of(neuron_view(q, q, HOSTILE, layer_labels=[4]).data)
    assert params["layer_labels"] == [4]
    assert params_of(neuron_view(vectors(), vectors(), HOSTILE).data)["layer_labels"] == [0, 1]
    for bad in ([1, 2], "4", [True], [1.0]):
        with pytest.raises(ValueError, match="expected layer_labels as 1 ints"):
            neuron_view(q, q, HOSTILE, layer_labels=bad)


def test_view_has_a_visible_button_and_labelled_selects():
    html = neuron_view(vectors(), vectors(seed=1), HOSTILE, include_libraries=False).data
    assert '<button type="button" class="attnlib-expand" aria-pressed="false">' in html
    assert html.count("<label>") == 2


def test_same_input_gives_the_same_html_apart_from_the_counter():
    first = neuron_view(vectors(), vectors(seed=1), HOSTILE, include_libraries=False).data
    second = neuron_view(vectors(), vectors(seed=1), HOSTILE, include_libraries=False).data
    strip = re.compile(r"(attnlib-neuron-[0-9a-f]{12})-\d+")
    assert first != second and strip.sub(r"\1", first) == strip.sub(r"\1", second)


@pytest.mark.parametrize(("queries", "keys", "tokens", "error", "message"), [
    (vectors(), vectors(), HOSTILE[:-1], ValueError, r"expected 7 tokens \(one per attention position L=7\), got 6"),
    (vectors(), vectors(), "abcdefg", TypeError, "expected tokens as a list of 7 strings, got str"),
    (vectors(), vectors(length=6), HOSTILE, ValueError,
     r"expected keys of shape \(N, H, L, Dk\) = \(2, 3, 7, 4\) like queries \(N layers\), got \(2, 3, 6, 4\)"),
    (vectors(), vectors(layers=3), HOSTILE, ValueError, r"got \(3, 3, 7, 4\)"),
    (vectors(), vectors(d_k=5), HOSTILE, ValueError, r"got \(2, 3, 7, 5\)"),
    (vectors(layers=1) + vectors(layers=1, heads=2), vectors(), HOSTILE, ValueError,
     r"expected every queries layer of shape \(H, L, Dk\) = \(3, 7, 4\) like layer 0, got \(2, 7, 4\) at layer 1"),
    ([torch.rand(2, 3, 7, 4)], vectors(layers=1), HOSTILE, ValueError,
     r"expected queries layer 0 of shape \(1, H, L, Dk\) or \(H, L, Dk\) .*got \(2, 3, 7, 4\)"),
    ([torch.rand(7, 4)], vectors(layers=1), HOSTILE, ValueError, r"queries layer 0 of shape .*got \(7, 4\)"),
    (torch.rand(2, 3, 7, 4), vectors(), HOSTILE, TypeError, "expected queries as a list with one .* got Tensor"),
    ([], vectors(), HOSTILE, ValueError, "expected queries for at least one layer, got an empty list"),
    (vectors(), [[[0.5]]], HOSTILE, TypeError, "expected keys layer 0 as a torch.Tensor or numpy.ndarray"),
])
def test_bad_shapes_and_token_counts_are_clear_errors(queries, keys, tokens, error, message):
    with pytest.raises(error, match=message):
        neuron_view(queries, keys, tokens)


def test_bad_options_and_values_are_clear_errors():
    q = vectors()
    with pytest.raises(ValueError, match=r"expected layer in \[0, 1\], got 2"):
        neuron_view(q, q, HOSTILE, layer=2)
    with pytest.raises(ValueError, match=r"expected head in \[0, 2\], got -1"):
        neuron_view(q, q, HOSTILE, head=-1)
    with pytest.raises(ValueError, match="expected display_mode 'light' or 'dark'"):
        neuron_view(q, q, HOSTILE, display_mode="blue")
    with pytest.raises(ValueError, match="expected decimals as an int >= 0 or None"):
        neuron_view(q, q, HOSTILE, decimals=1.5)
    bad = vectors()
    bad[1][0, 0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="expected finite keys, got NaN or inf"):
        neuron_view(q, bad, HOSTILE)


# --- in a real browser ----------------------------------------------------------------------------

DISPLAYED = """
const root = document.getElementById(arguments[0]);
return Array.from(root.querySelectorAll('#dotproducts .dotproduct')).map(r => r.getAttribute('data-value'));
"""


def open_page(browser, tmp_path, body: str, name="page.html"):
    page = tmp_path / name
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>",
                    encoding="utf-8")
    browser.get_log("browser"), browser.get_log("performance")
    browser.get(page.as_uri())
    for _ in range(100):
        if browser.execute_script("return document.querySelectorAll('.attnlib-neuron svg text').length") > 0:
            break
        browser.execute_script("return new Promise(r => setTimeout(r, 50))")
    return page


def hover(browser, root_id, panel, index):
    browser.execute_script(
        "document.querySelectorAll('#' + arguments[0] + ' ' + arguments[1] + ' #leftText > g')[arguments[2]]"
        ".dispatchEvent(new MouseEvent('mouseover'))", root_id, panel, index)


@pytest.mark.browser
@pytest.mark.parametrize("with_requirejs", [False, True], ids=["plain-page", "page-with-requirejs"])
def test_browser_draws_hostile_tokens_as_text_offline(browser, tmp_path, with_requirejs):
    queries, keys = vectors(seed=1), vectors(seed=2)
    html = neuron_view(queries, keys, HOSTILE, include_libraries=True).data
    prefix = requirejs_tag() if with_requirejs else ""
    page = open_page(browser, tmp_path, prefix + html)
    root = params_of(html)["root_div_id"]
    texts = browser.execute_script(
        "return Array.from(document.querySelectorAll('#' + arguments[0] + ' #collapsed text'))"
        ".map(t => t.textContent)", root)
    for token in HOSTILE:
        assert token in texts
    assert browser.execute_script("return window.__alerts") == []
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script(f"return document.querySelectorAll('#{root} svg line').length") > 0
    assert bu.console_errors(browser) == []
    assert [r.url for r in bu.network_requests(bu.performance_messages(browser))] == [page.as_uri()]
    assert browser.execute_script(f"return Array.from(document.querySelectorAll('#{root} #layer option'))"
                                  ".map(o => o.textContent)") == ["0", "1"]


@pytest.mark.browser
def test_browser_layer_menu_shows_the_labels(browser, tmp_path):
    html = neuron_view(vectors(layers=1), vectors(layers=1, seed=3), HOSTILE, layer_labels=[5],
                       include_libraries=True).data
    open_page(browser, tmp_path, html)
    root = params_of(html)["root_div_id"]
    assert browser.execute_script(f"return Array.from(document.querySelectorAll('#{root} #layer option'))"
                                  ".map(o => o.textContent)") == ["5"]
    assert bu.console_errors(browser) == []


@pytest.mark.browser
def test_browser_scores_equal_attnlib_scaled_dot_products(browser, tmp_path):
    queries, keys = vectors(seed=6), vectors(seed=7)
    exact = neuron_view(queries, keys, HOSTILE, layer=1, head=2, include_libraries=True, decimals=None).data
    rounded = neuron_view(queries, keys, HOSTILE, layer=1, head=2, include_libraries=False).data
    open_page(browser, tmp_path, exact + rounded)
    expected = expected_scores(queries, keys, 1, 2)  # attnlib's q·k/√Dk, (L, L)
    bound = 2 * 5e-4 * float(torch.stack(queries).abs().max() + torch.stack(keys).abs().max()) * 4 / 4**0.5
    for html, atol in ((exact, 1e-12), (rounded, bound)):
        root = params_of(html)["root_div_id"]
        browser.execute_script(f"document.querySelector('#{root} .attnlib-expand').click()")
        for i in range(len(HOSTILE)):
            hover(browser, root, "#expanded", i)
            shown = torch.tensor([float(v) for v in browser.execute_script(DISPLAYED, root)], dtype=torch.float64)
            torch.testing.assert_close(shown, expected[i], rtol=0, atol=atol)
            titles = browser.execute_script(f"return Array.from(document.querySelectorAll('#{root} .dotproduct title'))"
                                            ".map(t => t.textContent)")
            assert titles[0] == f"{HOSTILE[0]}: q · k / √d = {float(shown[0]):.3f}, softmax weight " + \
                titles[0].rsplit(" ", 1)[1]
    assert bu.console_errors(browser) == []


KEYBOARD_STATE = """
const root = document.getElementById(arguments[0]);
return {
  expanded: root.querySelector('#expanded').getAttribute('visibility'),
  pressed: root.querySelector('.attnlib-expand').getAttribute('aria-pressed'),
  focused: document.activeElement && document.activeElement.querySelector
           && (document.activeElement.querySelector('text') || {}).textContent,
  selected: Array.from(root.querySelectorAll('#leftText .highlight'))
            .filter(r => parseFloat(r.style.opacity) === 1).length,
};
"""


@pytest.mark.browser
def test_browser_expand_control_is_visible_and_works_from_the_keyboard(browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains  # noqa: PLC0415
    from selenium.webdriver.common.by import By  # noqa: PLC0415
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    html = neuron_view(vectors(seed=8), vectors(seed=9), HOSTILE, include_libraries=True).data
    open_page(browser, tmp_path, html)
    root = params_of(html)["root_div_id"]
    button = browser.find_element(By.CSS_SELECTOR, f"#{root} .attnlib-expand")
    assert button.is_displayed() and button.size["width"] > 20 and button.text.startswith("+")
    # from the layer menu, Tab reaches the head menu, the button, then the first query token
    browser.execute_script(f"document.querySelector('#{root} #layer').focus()")
    ActionChains(browser).send_keys(Keys.TAB * 2).perform()
    assert browser.switch_to.active_element == button
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    state = browser.execute_script(KEYBOARD_STATE, root)
    assert (state["expanded"], state["pressed"]) == ("visible", "true")
    ActionChains(browser).send_keys(Keys.TAB).perform()  # the first query token of the expanded panel
    state = browser.execute_script(KEYBOARD_STATE, root)
    assert state["focused"] == HOSTILE[0] and state["selected"] == 1
    assert len([v for v in browser.execute_script(DISPLAYED, root) if v is not None]) == len(HOSTILE)
    ActionChains(browser).send_keys(Keys.TAB, Keys.ENTER).perform()  # next token; Enter collapses
    state = browser.execute_script(KEYBOARD_STATE, root)
    assert (state["expanded"], state["pressed"], state["focused"]) == ("hidden", "false", HOSTILE[1])
    assert button.text.startswith("+")
    ActionChains(browser).send_keys(Keys.SPACE).perform()  # Space on the token expands again
    assert browser.execute_script(KEYBOARD_STATE, root)["expanded"] == "visible"
    assert bu.console_errors(browser) == []


FIT = """
const root = document.getElementById(arguments[0]);
const column = root.parentElement.getBoundingClientRect();
const svg = root.querySelector('#vis svg');
const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
const box = s => root.querySelector(s).getBoundingClientRect();
const right = Math.max(...['#expanded #dotproducts', '#expanded #rightText', '#expanded #heading']
  .map(s => box(s).right));
return {column: [column.left, column.right], right: right, scale: scale,
        text: 15 * scale,  // BertViz's tokens are 15 px in the drawing
        stops: Array.from(root.querySelectorAll('[tabindex="0"]')).length};
"""


@pytest.mark.browser
@pytest.mark.parametrize("column", [672, 358], ids=["laptop-column", "phone-column"])
def test_browser_expanded_view_fits_its_column(browser, tmp_path, column):
    """Chapter 6's view put q × k, the scores and the softmax 450 px right of a 672 px column (BertViz draws it
    1,120 px wide): expanded, all of it lies inside the column, its text never under 9 px, and each token is one
    Tab stop (the hidden panel's copies are not)."""
    tokens = ["[CLS]", "mark", "told", "sam", "that", "he", "was", "leaving", ".", "[SEP]"]
    html = neuron_view(vectors(length=len(tokens), d_k=64, seed=3), vectors(length=len(tokens), d_k=64, seed=4),
                       tokens, include_libraries=True).data
    open_page(browser, tmp_path, f'<div style="width:{column}px">{html}</div>')
    root = params_of(html)["root_div_id"]
    browser.execute_script(f"document.querySelector('#{root} .attnlib-expand').click()")
    hover(browser, root, "#expanded", tokens.index("he"))
    fit = browser.execute_script(FIT, root)
    assert fit["right"] <= fit["column"][1] + 1, f"the view reaches {fit['right']:.0f} px in a column ending at {fit}"
    assert fit["text"] >= 9 - 1e-6, f"the view is scaled so far that its text is {fit['text']:.1f} px"
    assert fit["stops"] == len(tokens) + 0, f"{fit['stops']} Tab stops in the view for {len(tokens)} tokens"
    assert bu.console_errors(browser) == []


@pytest.mark.browser
def test_browser_two_views_on_one_page_stay_apart(browser, tmp_path):
    first = neuron_view(vectors(seed=10), vectors(seed=11), HOSTILE, include_libraries=True).data
    second = neuron_view(vectors(seed=12), vectors(seed=13), HOSTILE, include_libraries=False).data
    open_page(browser, tmp_path, first + second)
    one, two = params_of(first)["root_div_id"], params_of(second)["root_div_id"]
    browser.execute_script(f"document.querySelector('#{two} .attnlib-expand').click()")
    hover(browser, two, "#expanded", 3)
    assert all(v is not None for v in browser.execute_script(DISPLAYED, two))
    assert all(v is None for v in browser.execute_script(DISPLAYED, one))  # the first view was left alone
    assert browser.execute_script(f"return document.querySelector('#{one} #expanded').getAttribute('visibility')") \
        == "hidden"
    assert bu.console_errors(browser) == []


def test_numpy_and_torch_give_the_same_page():
    q, k = vectors(seed=14), vectors(seed=15)
    a = params_of(neuron_view(q, k, HOSTILE).data)
    b = params_of(neuron_view([np.asarray(t) for t in q], [np.asarray(t) for t in k], HOSTILE).data)
    a.pop("root_div_id"), b.pop("root_div_id")
    assert a == b
