"""Sphinx extension: quick checks a reader answers on the page, without a kernel (the ``{quiz}`` fence).

``attncourse.quick_checks`` reads the fence (its syntax is there and in CONTRIBUTING.md, "Quick checks"); this module
draws it as a form that works with a keyboard and a screen reader and needs nothing from a server:

* a ``<fieldset>`` whose ``<legend>`` is "Check N." and the question, with native radio buttons (Tab into
  the group, arrows to choose) or a text field for a number, a "Check" button (Enter works too), and a
  ``role="status"`` region where ``static/quiz.js`` writes the verdict and the chosen answer's explanation,
  so a screen reader announces it;
* a ``<details>`` "Answer and explanations" with every choice's explanation: the whole answer without
  JavaScript, and the print edition's key (``quiz.js`` moves them under "Answers to the checks" at the end of
  the chapter before printing; ``print_book`` calls the same function).

Choices and explanations are Markdown and may glue numbers ({glue:text}`name:.2f`); a ``number`` check's
answer is a glued value, read here from the notebook's outputs, so no typed number can drift.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import directives
from myst_nb.core.variables import RetrievalError
from myst_nb.ext.glue.utils import retrieve_glue_data
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from attncourse.markup import format_glued
from attncourse.quick_checks import LETTERS, Quiz, QuizError, number_key, parse, tolerance_of

from . import site_assets
from .site_assets import STATIC_DIR

FILES = {"css": "quiz.css", "js": "quiz.js"}
VOID = {"input"}


class quiz_tag(nodes.General, nodes.Element):  # noqa: N801 - docutils names node classes in lower case
    """One HTML element of a quiz: ``tag`` with ``attributes``; its children are drawn inside it."""


def visit_quiz_tag(translator, node: quiz_tag) -> None:
    """Open the element (HTML builders)."""
    attributes = "".join(f' {key}="{translator.attval(str(value))}"' if value is not True else f" {key}"
                         for key, value in node["attributes"].items())
    translator.body.append(f"<{node['tag']}{attributes}>")


def depart_quiz_tag(translator, node: quiz_tag) -> None:
    """Close the element (HTML builders)."""
    if node["tag"] not in VOID:
        translator.body.append(f"</{node['tag']}>")


def skip_quiz_tag(translator, node: quiz_tag) -> None:
    """Other builders draw nothing of a quiz."""
    raise nodes.SkipNode


def tag(name: str, /, *children: nodes.Node, **attributes) -> quiz_tag:
    """A ``quiz_tag``; ``class_`` and ``data_x``-style keyword names become ``class`` and ``data-x``."""
    attributes = {key.rstrip("_").replace("_", "-"): value for key, value in attributes.items()}
    return quiz_tag("", *children, tag=name, attributes=attributes)


class QuizDirective(SphinxDirective):
    """```` ```{quiz} question ```` with choices and explanations: one quick check (``attncourse.quick_checks``)."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {"type": directives.unchanged, "tolerance": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        """The check's form, numbered in the page's order."""
        try:
            quiz = parse(self.arguments[0], "\n".join(self.content), dict(self.options))
            values = self._values(quiz)
        except QuizError as error:
            raise self.error(str(error)) from None
        number = self.env.new_serialno("attnlib-quiz") + 1
        ident = f"check-{number}"
        question, _ = self.parse_inline(quiz.question, lineno=self.lineno)
        legend = tag("legend", tag("span", nodes.Text(f"Check {number}."), class_="attnlib-quiz-number"),
                     nodes.Text(" "), *question, id=f"{ident}-question")
        fieldset = tag("fieldset", legend)
        if quiz.prompt:
            fieldset += tag("div", *self.parse_text_to_nodes(quiz.prompt), class_="attnlib-quiz-prompt")
        fieldset += self._choices(quiz, ident) if quiz.kind == "choice" else self._number_field(ident)
        form = tag("form", fieldset, class_="attnlib-quiz", id=ident, data_kind=quiz.kind, novalidate=True)
        form += tag("button", nodes.Text("Check"), type="submit", class_="attnlib-quiz-check", hidden=True)
        form += tag("div", role="status", aria_live="polite", class_="attnlib-quiz-feedback")
        form += self._answers(quiz, values)
        return [form]

    def _values(self, quiz: Quiz) -> dict[str, tuple[float, str, float]]:
        """``{choice text: (value, shown, tolerance)}`` of a number check: each choice's glued value."""
        if quiz.kind != "number":
            return {}
        values = {}
        for choice in quiz.choices:
            name, spec = number_key(choice)
            try:
                stored = retrieve_glue_data(self.state.document, name).data
            except RetrievalError:
                raise QuizError(f"quiz {quiz.question!r}: expected a value glued as {name!r} in this notebook's "
                                "outputs, got none (glue it in a code cell and execute the chapter)") from None
            text = str(stored.get("text/plain", "")).strip()
            shown = format_glued(text, spec)
            try:
                values[choice.text] = (float(text), shown, tolerance_of(quiz, shown))
            except ValueError:
                raise QuizError(f"quiz {quiz.question!r}: expected the glued value {name!r} to be a number, "
                                f"got {text[:40]!r}") from None
        return values

    def _choices(self, quiz: Quiz, ident: str) -> quiz_tag:
        choices = tag("div", class_="attnlib-quiz-choices")
        for i, choice in enumerate(quiz.choices):
            text, _ = self.parse_inline(choice.text, lineno=self.lineno + choice.line + 1)
            field = f"{ident}-{LETTERS[i].lower()}"
            label = tag("label", tag("span", nodes.Text(f"{LETTERS[i]}."), class_="attnlib-quiz-letter"),
                        nodes.Text(" "), *text, for_=field)
            choices += tag("div", tag("input", type="radio", name=ident, id=field, value=str(i)), label,
                           class_="attnlib-quiz-choice")
        return choices

    def _number_field(self, ident: str) -> quiz_tag:
        field = f"{ident}-answer"
        return tag("div", tag("label", nodes.Text("Your answer (a number)"), for_=field),
                   tag("input", type="text", inputmode="decimal", autocomplete="off", spellcheck="false",
                       id=field, name=field), class_="attnlib-quiz-field")

    def _answers(self, quiz: Quiz, values: dict) -> quiz_tag:
        """The ``<details>`` with every choice's explanation; ``quiz.js`` shows the chosen one as feedback."""
        items = tag("div", class_="attnlib-quiz-explanations")
        for i, choice in enumerate(quiz.choices):
            body = self.parse_text_to_nodes(choice.explanation, offset=self.content_offset + choice.line + 1)
            if quiz.kind == "choice":
                head = f"{LETTERS[i]}. {'Right' if choice.correct else 'Wrong'}."
                data = {"data_choice": str(i)}
            else:
                value, shown, tolerance = values[choice.text]
                head = f"Answer: {shown}." if choice.correct else f"If you got {shown}:"
                data = {"data_value": repr(value), "data_tolerance": repr(tolerance)}
            lead = tag("p", tag("strong", nodes.Text(head)), class_="attnlib-quiz-verdict")
            items += tag("div", lead, *body, class_="attnlib-quiz-explanation",
                         data_correct="true" if choice.correct else "false", **data)
        summary = tag("summary", nodes.Text("Answer and explanations"))
        return tag("details", summary, items, class_="attnlib-quiz-answers")


def copy_static(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: quiz.css and quiz.js into the output's ``_static/attnlib/``."""
    if exception is not None or app.builder is None or app.builder.format != "html":
        return
    site_assets.copy_static(app.outdir, FILES.values())


def setup(app: Sphinx) -> dict:
    """Register the ``quiz`` directive, its HTML and its CSS and JavaScript."""
    skip = (skip_quiz_tag, None)
    app.add_node(quiz_tag, html=(visit_quiz_tag, depart_quiz_tag), latex=skip, text=skip, man=skip, texinfo=skip)
    app.add_directive("quiz", QuizDirective)
    app.connect("build-finished", copy_static)
    app.add_css_file(f"{STATIC_DIR}/{FILES['css']}", priority=900)
    app.add_js_file(f"{STATIC_DIR}/{FILES['js']}", defer="defer", priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
