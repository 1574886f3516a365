"""The ``{quiz}`` directive (attnsite/quiz.py) in a tiny Sphinx build: the form it writes, a number check's
answer read from the notebook's glued outputs, and bad input stopping the build with a message that names the
quiz. The browser side (keyboard, screen reader, axe) is tests/site/test_quiz.py."""

from __future__ import annotations

import io
import re
from pathlib import Path

import nbformat
import pytest
from sphinx.application import Sphinx

from attnlib.glue import glue_output

GOOD = """\
:::{quiz} Which key does the query of *sat* score highest, {glue:text}`top:.0f`?
- [ ] *mat*
  Orthogonal: its score is 0.
- [x] *cat*
  Aligned: $8 \\times 1$.
:::

```{quiz} The score of *sat* with *cat*?
:type: number
- [x] top:.1f
  Eight times one.
- [ ] half:.1f
  Half of it.
```
"""


def _glued(name: str, value) -> nbformat.NotebookNode:
    data, metadata = _output(name, value)
    return nbformat.v4.new_output("display_data", data=data, metadata=metadata)


def _output(name, value):
    from IPython.core.formatters import format_display_data  # noqa: PLC0415, F401 - glue_output needs IPython

    return glue_output(name, value, display=False)


def build(tmp_path: Path, markdown: str) -> tuple[str, str]:
    """(page HTML, warnings) of a one-notebook Sphinx build with myst-nb and the quiz extension."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["myst_nb", "attnsite.quiz"]\nnb_execution_mode = "off"\n'
                                 'myst_enable_extensions = ["colon_fence", "dollarmath"]\n'
                                 'exclude_patterns = ["_build"]\n')
    code = nbformat.v4.new_code_cell("glue(...)", outputs=[_glued("top", 8.0), _glued("half", 4.0)])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Page"), code,
                                         nbformat.v4.new_markdown_cell(markdown)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, src / "index.ipynb")
    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
                 status=None, warning=warnings, freshenv=True)
    app.build()
    page = tmp_path / "out" / "index.html"
    return (page.read_text(encoding="utf-8") if page.exists() else ""), warnings.getvalue()


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> str:
    html, warnings = build(tmp_path_factory.mktemp("good"), GOOD)
    assert "quiz" not in warnings.lower(), warnings
    return html


def test_a_choice_check_is_a_fieldset_of_radio_buttons_with_a_live_region(good):
    form = re.search(r'<form class="attnlib-quiz" id="check-1".*?</form>', good, re.S).group(0)
    assert re.search(r'<legend id="check-1-question"><span class="attnlib-quiz-number">Check 1\.</span> '
                     r"Which key does the query of <em>sat</em> score highest, "
                     r'<span class="pasted-text">8</span>\?</legend>', form)
    radios = re.findall(r'<input type="radio" name="check-1" id="(check-1-[ab])" value="(\d)">', form)
    assert radios == [("check-1-a", "0"), ("check-1-b", "1")]
    assert '<label for="check-1-b"><span class="attnlib-quiz-letter">B.</span> <em>cat</em></label>' in form
    assert '<div role="status" aria-live="polite" class="attnlib-quiz-feedback"></div>' in form
    assert re.search(r'<button type="submit" class="attnlib-quiz-check" hidden>Check</button>', form)
    explanations = re.findall(r'data-correct="(true|false)" data-choice="(\d)"><p class="attnlib-quiz-verdict">'
                              r"<strong>([^<]*)</strong></p>\s*<p>([^<]*)", form)
    assert r'<span class="math notranslate nohighlight">\(8 \times 1\)</span>' in form
    assert explanations == [("false", "0", "A. Wrong.", "Orthogonal: its score is 0."),
                            ("true", "1", "B. Right.", "Aligned: ")]
    assert "<summary>Answer and explanations</summary>" in form


def test_a_number_check_takes_its_answer_and_tolerance_from_the_glued_values(good):
    form = re.search(r'<form class="attnlib-quiz" id="check-2".*?</form>', good, re.S).group(0)
    assert 'data-kind="number"' in form
    assert '<label for="check-2-answer">Your answer (a number)</label>' in form
    assert 'data-correct="true" data-value="8.0" data-tolerance="0.05"' in form
    assert 'data-correct="false" data-value="4.0" data-tolerance="0.05"' in form
    assert "<strong>Answer: 8.0.</strong>" in form and "<strong>If you got 4.0:</strong>" in form


@pytest.mark.parametrize(("markdown", "expected"), [
    ("```{quiz} Which?\n- [x] a\n  Why.\n- [x] b\n  Why.\n```\n",
     "quiz 'Which?': expected exactly one right choice '- [x]', got 2"),
    ("```{quiz} How much?\n:type: number\n- [x] missing:.1f\n  Why.\n```\n",
     "quiz 'How much?': expected a value glued as 'missing' in this notebook's outputs"),
])
def test_bad_input_stops_the_build_naming_the_quiz(tmp_path, markdown, expected):
    _, warnings = build(tmp_path, markdown)
    assert expected in warnings
