"""The site's build helpers (attnsite: site_assets, vendor_assets, fontawesome_subset, typeset_math): the npm
libraries, the copies of d3 and jQuery that attnlib ships for its notebook views, and the formulas typeset by
MathJax in node, without a browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sphinx.errors import ExtensionError

from attnlib.views import html as views_html
from attnsite import fontawesome_subset, typeset_math, vendor_assets
from attnsite import site_assets as assets

REPO = Path(__file__).resolve().parents[2]

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="needs node (installed with npm, see .ci/run)")


def pinned() -> dict[str, str]:
    return json.loads((REPO / "package.json").read_text(encoding="utf-8"))["dependencies"]


def test_every_pin_is_exact_and_installed_at_that_version():
    for name, version in pinned().items():
        assert version[0].isdigit(), f"expected an exact version for {name} in package.json, got {version!r}"
        installed = json.loads((assets.node_modules() / name / "package.json").read_text(encoding="utf-8"))
        assert installed["version"] == version, (name, installed["version"], version)


def test_lockfile_pins_the_same_versions():
    lock = json.loads((REPO / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    for name, version in pinned().items():
        assert lock[f"node_modules/{name}"]["version"] == version, name


def test_attnlib_ships_the_pinned_npm_files_unchanged_with_their_licences():
    """attnlib/views/js/vendor/ holds copies of npm's d3 and jQuery (the views inline them where no npm exists)."""
    shipped = Path(views_html.__file__).parent / "js" / "vendor"
    for name, npm_file in (("d3", "d3/dist/d3.min.js"), ("jquery", "jquery/dist/jquery.min.js")):
        assert views_html.library_source(name) == (assets.node_modules() / npm_file).read_text(encoding="utf-8")
        assert name in views_html.LIBRARY_FILES
    assert (shipped / "d3.LICENSE").read_bytes() == (assets.node_modules() / "d3" / "LICENSE").read_bytes()
    assert (shipped / "jquery.LICENSE.txt").read_bytes() == \
        (assets.node_modules() / "jquery" / "LICENSE.txt").read_bytes()
    assert sorted(p.name for p in shipped.iterdir()) == ["d3.LICENSE", "d3.min.js", "jquery.LICENSE.txt",
                                                         "jquery.min.js"]


def test_site_files_come_from_node_modules_and_cover_the_configured_paths():
    pairs = assets.site_files()
    sites = {site for _, site in pairs}
    root = assets.node_modules().resolve()
    assert all(source.resolve().is_relative_to(root) and source.is_file() for source, _ in pairs)
    for needed in (assets.WIDGETS_JS, *(assets.site_url(n) for n in assets.LIBRARIES)):
        assert needed in sites, needed
    fonts = [site for site in sites if site.startswith(typeset_math.FONTS)]  # what the math's stylesheet names
    assert any(site.endswith("/MathJax_Main-Regular.woff") for site in fonts), sorted(sites)
    assert not any(site.endswith("embed-amd.js") for site in sites)


def test_config_points_at_the_vendored_copies_and_the_build_s_typesetting():
    config = (REPO / "_config.yml").read_text(encoding="utf-8")
    assert assets.WIDGETS_JS.removeprefix("_static/") in config
    assert f"html_math_renderer: {typeset_math.RENDERER}" in config and "mathjax_path" not in config


def test_unknown_library_and_missing_node_modules_say_what_was_expected(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match=r"expected a library name in .*'d3'.*got 'd4'"):
        assets.site_url("d4")
    monkeypatch.setenv("ATTNLIB_NODE_MODULES", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="expected ATTNLIB_NODE_MODULES to name a folder, got .*nowhere"):
        assets.node_modules()


def test_a_checkout_without_node_modules_is_told_to_run_npm_ci(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNLIB_NODE_MODULES", raising=False)
    monkeypatch.setattr(assets, "REPO", tmp_path)
    with pytest.raises(FileNotFoundError, match="npm ci"):
        assets.node_modules()


def run_node(script: str) -> str:
    return subprocess.run([NODE], input=script, check=True, capture_output=True, text=True, timeout=60).stdout


@needs_node
def test_shipped_d3_sets_window_d3_even_when_an_amd_loader_is_present():
    program = f"""
const vm = require('vm');
const context = {{ define: Object.assign(() => {{ throw new Error('define() called'); }}, {{ amd: {{}} }}) }};
context.window = context;
vm.createContext(context);
vm.runInContext({json.dumps(views_html.global_script("d3"))}, context);
process.stdout.write(JSON.stringify({{ version: context.d3.version, select: typeof context.d3.select }}));
"""
    result = json.loads(run_node(program))
    assert result == {"version": pinned()["d3"], "select": "function"}


@needs_node
@pytest.mark.parametrize("sequence", ["</script>", "</SCRIPT ", "<!--"])
def test_a_library_that_could_break_out_of_its_script_element_is_refused(monkeypatch, sequence):
    monkeypatch.setattr(views_html, "library_source", lambda name: f"var s = '{sequence}';")
    for name in ("d3", "jquery"):
        with pytest.raises(ValueError, match=f"expected {name} source without '</script' or '<!--'"):
            views_html.global_script(name)


def test_fontawesome_subset_keeps_only_named_icons_and_their_aliases():
    source = (assets.node_modules() / vendor_assets.FONTAWESOME / "js" / "solid.js").read_text(encoding="utf-8")
    _, icons, _ = fontawesome_subset._split_pack(source, "solid")
    alias_owner = next(n for n, icon in icons.items() if any(isinstance(a, str) for a in icon[2]))
    alias = next(a for a in icons[alias_owner][2] if isinstance(a, str))
    text, kept = fontawesome_subset.subset_pack(source, {"bars", alias}, "solid")
    _, subset, _ = fontawesome_subset._split_pack(text, "solid")
    assert set(subset) == {"bars", alias_owner} and kept == 2
    assert subset["bars"] == icons["bars"]
    assert text.count("defineIcons('fas', icons)") == source.count("defineIcons('fas', icons)") == 1


def test_fontawesome_used_names_reads_pages_and_site_scripts_but_not_vendored_code(tmp_path):
    (tmp_path / "_static" / "_vendor").mkdir(parents=True)
    (tmp_path / "page.html").write_text('<i class="fa-solid fa-bars"></i>', encoding="utf-8")
    (tmp_path / "_static" / "theme.js").write_text('el.classList = "fa-solid fa-xmark"', encoding="utf-8")
    (tmp_path / "_static" / "_vendor" / "lib.js").write_text('"fa-rocket"', encoding="utf-8")
    assert fontawesome_subset.used_names(tmp_path) == {"solid", "bars", "xmark"}


class Script:
    def __init__(self, filename, priority=500, **attributes):
        self.filename, self.priority, self.attributes = filename, priority, attributes


def test_duplicate_inline_scripts_are_dropped_once_per_page():
    body = {"body": "const THEBE_JS_URL = 1"}
    scripts = [Script(None, **body), Script("a.js"), Script("", **body), Script("a.js", defer="defer")]
    context = {"script_files": scripts}
    vendor_assets.finish_page_scripts(None, "page", "page.html", context, None)
    assert [(s.filename, s.attributes) for s in context["script_files"]] == [
        (None, body), ("a.js", {}), ("a.js", {"defer": "defer"})]


def test_inlined_libraries_become_script_elements_for_the_vendored_copies(tmp_path):
    page = tmp_path / "book" / "06.html"
    page.parent.mkdir()
    inline = views_html.libraries_script()
    page.write_text(f"<html><body><div>view</div>{inline}<p>after</p></body></html>", encoding="utf-8")
    assert vendor_assets.link_libraries(page, tmp_path) is True
    text = page.read_text(encoding="utf-8")
    assert views_html.library_source("d3")[:2000] not in text and views_html.library_source("jquery")[:2000] not in text
    assert text.count('<script src="../_static/_vendor/d3.min.js"></script>') == 1
    assert text.count('<script src="../_static/_vendor/jquery.min.js"></script>') == 1
    assert text.index("d3.min.js") < text.index("jquery.min.js") < text.index("<p>after</p>")
    assert vendor_assets.link_libraries(page, tmp_path) is False  # nothing left to replace


def test_the_element_is_found_by_its_attribute_whatever_its_text():
    """A page written by another attnlib (another inline copy, other attributes) is linked the same way; scripts
    without the attribute, and text that only looks like the element, stay."""
    other = ('<p>&lt;script data-vendored="d3 jquery"&gt;</p><script>var a = 1;</script>\n'
             '<SCRIPT type="text/javascript" data-vendored="d3 jquery" id="x">\n/* another version */\n</SCRIPT >'
             '<script>var b = "</scrip";</script>')
    linked, count = vendor_assets.link_vendored(other, "..")
    assert count == 1 and "another version" not in linked
    assert linked.startswith('<p>&lt;script data-vendored="d3 jquery"&gt;</p><script>var a = 1;</script>\n')
    assert linked.endswith('<script>var b = "</scrip";</script>')
    assert linked.count('<script src="../_static/_vendor/d3.min.js"></script>') == 1
    assert vendor_assets.link_vendored(linked, "..") == (linked, 0)  # the loader carries no attribute


def test_an_element_naming_other_libraries_is_an_error():
    with pytest.raises(vendor_assets.ExtensionError, match='expected data-vendored="d3 jquery".*got "d3 lodash"'):
        vendor_assets.link_vendored('<script data-vendored="d3 lodash">x</script>', "..")


@pytest.mark.parametrize("url", ["a b.js", '"><script>x.js', "d3.min.css", None])
def test_the_loader_refuses_urls_it_cannot_put_in_an_attribute_as_they_are(url):
    with pytest.raises(ValueError, match="expected a plain relative URL"):
        vendor_assets.libraries_loader(url, "jquery.min.js")


# --- the formulas, typeset when the site is built (attnsite/typeset_math.py) -------------------------------


@needs_node
def test_a_formula_becomes_mathjax_s_output_with_its_mathml_at_the_browser_s_scale():
    html = typeset_math.typesetter().typeset(r"\sqrt{d_k}", display=False)
    assert html.startswith('<mjx-container class="MathJax" jax="CHTML"'), html[:200]
    assert f"font-size: {typeset_math.SCALE:.1%}" in html, html[:200]  # the scale MathJax set in the browser
    mathml = re.search(r"<mjx-assistive-mml[^>]*>(.*)</mjx-assistive-mml>", html)
    assert mathml and "<msqrt><msub><mi>d</mi><mi>k</mi></msub></msqrt>" in mathml[1], html
    display = typeset_math.typesetter().typeset(r"\begin{split}a &= b \\ &= c\end{split}", display=True)
    assert 'display="true"' in display and display.count("<mjx-mtr") == 2, display[:300]


@needs_node
def test_a_tex_error_is_mathjax_s_message_not_a_red_formula():
    with pytest.raises(typeset_math.TeXError, match=r"Undefined control sequence \\softmx"):
        typeset_math.typesetter().typeset(r"\softmx(x)", display=False)
    with pytest.raises(typeset_math.TeXError, match="Missing close brace"):
        typeset_math.typesetter().typeset(r"\frac{a}{b", display=True)
    assert "<mjx-c" in typeset_math.typesetter().typeset("x", display=False)  # it goes on after an error


@needs_node
def test_node_that_stops_is_an_error_with_what_it_said(tmp_path):
    modules = tmp_path / "node_modules"
    (modules / "mathjax").mkdir(parents=True)  # no MathJax in it: node stops at once
    with pytest.raises(ExtensionError, match=r"(?s)expected MathJax in node to answer, but it stopped: .*(Cannot find|"
                                             r"MathJax did not start)"):
        typeset_math.Typesetter(modules).typeset("x", display=False)


@needs_node
def test_the_stylesheet_names_only_fonts_the_site_serves():
    css = typeset_math.typesetter().stylesheet()
    served = {site for _, site in assets.site_files()}
    stylesheet_dir = Path("_static") / typeset_math.STYLESHEET
    urls = set(re.findall(r'url\("([^"]+)"\)', css))
    assert len(urls) > 20, urls
    for url in urls:
        site = Path(os.path.normpath(stylesheet_dir.parent / url)).as_posix()
        assert site in served, f"the math's stylesheet names {url} ({site}), which the site does not serve"


@needs_node
def test_a_page_with_a_tex_error_fails_the_build_and_names_its_line(tmp_path):
    """As `make book` builds (-W): the warning at the formula's source line stops the build."""
    (tmp_path / "conf.py").write_text("extensions = ['attnsite.typeset_math']\nhtml_math_renderer = 'attnlib'\n")
    (tmp_path / "index.rst").write_text("Title\n=====\n\nGood :math:`d_k`.\n\nBad :math:`\\softmx(x)`.\n")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(tmp_path),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0, done.stdout + done.stderr
    assert 'index.rst:6:' in done.stderr and \
        'MathJax cannot typeset "\\softmx(x)": Undefined control sequence \\softmx' in done.stderr, done.stderr
