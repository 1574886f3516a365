"""The ``{quiz}`` fence (attncourse/quick_checks.py): what it reads, the errors it gives, and its plain Markdown in a
release.

The website's drawing of a check is tested in a browser (tests/site/test_quiz.py)."""

from __future__ import annotations

import itertools

import nbformat
import pytest

from attncourse import quick_checks
from attncourse.markup import plain_markdown, student_notebook
from attncourse.quick_checks import QuizError, parse

CHOICE_BODY = """\
Given $q = (1, 0)$:

- [ ] *mat*
  Its score is lower: 0.2.
- [x] *cat*
  Right: the largest score,
  0.8.

  A second paragraph.
- [ ] *the*
  Its key is orthogonal.
"""


def test_a_choice_check_reads_question_prompt_choices_and_explanations():
    check = parse("  Which key   scores highest? ", CHOICE_BODY)
    assert check.question == "Which key scores highest?"
    assert check.kind == "choice" and check.tolerance is None
    assert check.prompt == "Given $q = (1, 0)$:"
    assert [c.text for c in check.choices] == ["*mat*", "*cat*", "*the*"]
    assert [c.correct for c in check.choices] == [False, True, False]
    assert check.answer.explanation == "Right: the largest score,\n0.8.\n\nA second paragraph."
    assert check.choices[2].explanation == "Its key is orthogonal."


def test_a_number_check_reads_glued_names_with_formats_and_tolerance():
    body = "- [x] sat_cat:.2f\n  It is 0.8.\n- [ ] sat_cat_raw:.3f\n  Not scaled.\n"
    check = parse("The score?", body, {"type": "number", "tolerance": "0.01"})
    assert check.kind == "number" and check.tolerance == 0.01
    assert [quick_checks.number_key(c) for c in check.choices] == [("sat_cat", ".2f"), ("sat_cat_raw", ".3f")]
    assert quick_checks.tolerance_of(check, "0.80") == 0.01
    default = parse("The score?", "- [x] sat_cat:.2f\n  It is 0.8.\n", {"type": "number"})
    assert quick_checks.tolerance_of(default, "0.80") == pytest.approx(0.005)
    assert quick_checks.tolerance_of(default, "12") == pytest.approx(0.5)


@pytest.mark.parametrize(("question", "body", "options", "expected"), [
    ("", CHOICE_BODY, {}, "expected the question"),
    ("Which?", "Just prose.\n", {}, "expected choices"),
    ("Which?", "- [x] a\n  Why.\n", {}, "expected at least two choices, got 1"),
    ("Which?", "- [x] a\n  Why.\n- [x] b\n  Why.\n", {}, "expected exactly one right choice '- [x]', got 2"),
    ("Which?", "- [ ] a\n  Why.\n- [ ] b\n  Why.\n", {}, "expected exactly one right choice '- [x]', got 0"),
    ("Which?", "- [x] a\n- [ ] b\n  Why.\n", {}, "expected an explanation (indented by two spaces, on the lines "
                                                "below) for the choice 'a', got none"),
    ("Which?", "- [x] a\n  Why.\nunindented\n- [ ] b\n  Why.\n", {}, "line 3: expected a choice"),
    ("Which?", CHOICE_BODY, {"type": "essay"}, "expected :type: to be one of choice, number, got 'essay'"),
    ("Which?", CHOICE_BODY, {"tolerance": "0.1"}, "expected :tolerance: only with :type: number"),
    ("Which?", CHOICE_BODY, {"answer": "x"}, "expected the options :type: and :tolerance: only, got :answer:"),
    ("How much?", "- [x] 0.8\n  Typed.\n", {"type": "number"}, "expected each choice of a :type: number quiz to "
                                                                "be a glued value's name with its format"),
    ("How much?", "- [x] w:.2f\n  Why.\n", {"type": "number", "tolerance": "-1"}, "positive number, got '-1'"),
])
def test_bad_input_names_the_quiz_and_what_was_expected(question, body, options, expected):
    with pytest.raises(QuizError) as error:
        parse(question, body, options)
    assert expected in str(error.value)
    if question:
        assert f"quiz {question!r}" in str(error.value)


def test_the_release_gets_numbered_plain_markdown_with_the_answer_collapsed():
    source = ("Before.\n\n```{quiz} Which key scores {glue:text}`top:.1f`?\n" + CHOICE_BODY + "```\n\n"
              "```{quiz} The score?\n:type: number\n- [x] top:.2f\n  Because.\n- [ ] low:.1f\n  Unscaled.\n```\n")
    text = plain_markdown(source, "01_x", {}, None, "", glued={"top": "0.8", "low": "1.25"},
                          quizzes=itertools.count(3))
    assert "{quiz}" not in text and "{glue" not in text and "- [x]" not in text
    assert "**Check 3.** Which key scores 0.8?" in text
    assert "- **B.** *cat*" in text
    assert "<details><summary>Answer</summary>\n\n**A. Wrong.** Its score is lower: 0.2." in text
    assert "**B. Right.** Right: the largest score,\n0.8.\n\nA second paragraph." in text
    assert "**Check 4.** The score?" in text
    assert "**Answer: 0.80.** Because." in text and "**If you got 1.2:** Unscaled." in text
    assert text.count("</details>") == 2


def test_checks_are_numbered_across_a_notebooks_cells():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"```{{quiz}} Q{i}?\n{CHOICE_BODY}```")
                                         for i in range(2)])
    student = student_notebook(nb, "01_x", {}, None)
    assert "**Check 1.** Q0?" in student.cells[0].source
    assert "**Check 2.** Q1?" in student.cells[1].source


def test_a_number_check_needs_its_glued_value_in_the_release():
    source = "```{quiz} The score?\n:type: number\n- [x] missing:.2f\n  Because.\n```\n"
    with pytest.raises(KeyError, match="expected a glued value 'missing'"):
        plain_markdown(source, "01_x", {}, None, "", glued={})
