"""Quick checks a reader answers on the page: the ``{quiz}`` fence, read once for the website and the release.

A chapter ends a section with a Markdown cell holding one or more fences (CONTRIBUTING.md, "Quick checks")::

    ```{quiz} Which key does the query of *sat* score highest?
    - [ ] *mat*
      Its score is {glue:text}`sat_mat:.2f`, below *cat*'s: ...
    - [x] *cat*
      Right: ...
    ```

    ```{quiz} The score of *sat* with *cat*, to two decimals?
    :type: number
    - [x] sat_cat:.2f
      1·0.8 + 0·0.6 = ...
    - [ ] sat_cat_unscaled:.2f
      That is the score before the division by √2: ...
    ```

The fence's argument is the question (one line of inline Markdown). Lines before the first choice are an
optional prompt (Markdown: a small matrix, a formula). Each choice is ``- [x]`` (right) or ``- [ ]`` (wrong)
at the start of a line, followed by its explanation on the lines below, indented by two spaces: every choice
has one, the wrong ones saying why they are wrong. ``:type: choice`` (the default) has exactly one right
choice among two or more. ``:type: number`` asks for a number: each choice's text is a glued value's name
with the glue role's format (``sat_cat:.2f``), the right one the answer, the wrong ones common mistakes the
chapter computes too; a typed number within ``:tolerance:`` (default: half a unit of the format's last
digit) of a choice's value gets that choice's explanation.

:func:`parse` reads a fence's parts into a :class:`Quiz`; ``attnsite.quiz`` draws it on the website and
:func:`plain_markdown` writes it for the student release (``attncourse/markup.py``), where the question, its
choices and, in a collapsed ``<details>``, the answer with every explanation read as plain Markdown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("choice", "number")
CHOICE = re.compile(r"^- \[(?P<mark>[ xX])\][ \t]+(?P<text>\S.*)$")
NUMBER_KEY = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?::(?P<spec>[^`\s]+))?$")
LETTERS = "ABCDEFGHIJ"


class QuizError(ValueError):
    """A ``{quiz}`` fence that does not follow the syntax; the message names the quiz and what was expected."""


@dataclass(frozen=True)
class Choice:
    """One choice: its text (inline Markdown, or ``name:spec`` of a glued number), whether it is the right one,
    and why (Markdown)."""

    text: str
    correct: bool
    explanation: str
    line: int  # 0-based, within the fence's body


@dataclass(frozen=True)
class Quiz:
    """A parsed ``{quiz}`` fence."""

    question: str
    kind: str
    prompt: str
    choices: tuple[Choice, ...]
    tolerance: float | None

    @property
    def answer(self) -> Choice:
        """The right choice."""
        return next(c for c in self.choices if c.correct)


def _name(question: str) -> str:
    short = " ".join(question.split())
    return repr(short if len(short) <= 60 else short[:57] + "...")


def _choices(name: str, lines: list[str], first: int) -> tuple[Choice, ...]:
    """The ``- [x]``/``- [ ]`` items of ``lines[first:]``, each with its indented explanation."""
    items: list[tuple[int, re.Match, list[str]]] = []
    for number, line in enumerate(lines[first:], start=first):
        match = CHOICE.match(line)
        if match:
            items.append((number, match, []))
        elif line.strip() and not line.startswith("  "):
            raise QuizError(f"quiz {name}, line {number + 1}: expected a choice '- [x] text' or '- [ ] text' or its "
                            f"explanation indented by two spaces, got {line.strip()!r}")
        else:
            items[-1][2].append(line[2:])
    choices = []
    for number, match, body in items:
        explanation = "\n".join(body).strip()
        if not explanation:
            raise QuizError(f"quiz {name}, line {number + 1}: expected an explanation (indented by two spaces, on the "
                            f"lines below) for the choice {match['text'].strip()!r}, got none")
        choices.append(Choice(match["text"].strip(), match["mark"] != " ", explanation, number))
    return tuple(choices)


def _options(name: str, options: dict[str, str]) -> tuple[str, float | None]:
    unknown = set(options) - {"type", "tolerance"}
    if unknown:
        raise QuizError(f"quiz {name}: expected the options :type: and :tolerance: only, got :{sorted(unknown)[0]}:")
    kind = options.get("type", "choice").strip()
    if kind not in KINDS:
        raise QuizError(f"quiz {name}: expected :type: to be one of {', '.join(KINDS)}, got {kind!r}")
    tolerance = options.get("tolerance")
    if tolerance is None:
        return kind, None
    if kind != "number":
        raise QuizError(f"quiz {name}: expected :tolerance: only with :type: number, got it with :type: {kind}")
    try:
        value = float(tolerance)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise QuizError(f"quiz {name}: expected :tolerance: to be a positive number, got {tolerance!r}")
    return kind, value


def _check(name: str, kind: str, choices: tuple[Choice, ...]) -> None:
    right = sum(c.correct for c in choices)
    if kind == "choice" and len(choices) < 2:
        raise QuizError(f"quiz {name}: expected at least two choices, got {len(choices)}")
    if len(choices) > len(LETTERS):
        raise QuizError(f"quiz {name}: expected at most {len(LETTERS)} choices, got {len(choices)}")
    if right != 1:
        raise QuizError(f"quiz {name}: expected exactly one right choice '- [x]', got {right}")
    if kind == "number":
        for choice in choices:
            if not NUMBER_KEY.match(choice.text):
                raise QuizError(f"quiz {name}: expected each choice of a :type: number quiz to be a glued value's "
                                f"name with its format, like 'sat_cat:.2f', got {choice.text!r}")


def parse(question: str, body: str, options: dict[str, str] | None = None) -> Quiz:
    """A :class:`Quiz` from a fence's argument, its body (without the options) and its options.

    Raises :class:`QuizError`, naming the quiz by its question and saying what was expected.
    """
    question = " ".join(question.split())
    name = _name(question)
    if not question:
        raise QuizError(f"quiz at {body.strip()[:40]!r}: expected the question after {{quiz}}, got none")
    kind, tolerance = _options(name, options or {})
    lines = body.splitlines()
    first = next((i for i, line in enumerate(lines) if CHOICE.match(line)), None)
    if first is None:
        raise QuizError(f"quiz {name}: expected choices, lines starting '- [x] ' (right) or '- [ ] ' (wrong), got none")
    choices = _choices(name, lines, first)
    _check(name, kind, choices)
    return Quiz(question, kind, "\n".join(lines[:first]).strip(), choices, tolerance)


OPTION_LINE = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")


def split_options(body: str) -> tuple[dict[str, str], str]:
    """``({option: value}, rest)``: the ``:key: value`` lines at the top of a fence's body, and the body after."""
    lines = body.splitlines()
    options = {}
    while lines and OPTION_LINE.match(lines[0]):
        match = OPTION_LINE.match(lines.pop(0))
        options[match["key"]] = match["value"]
    return options, "\n".join(lines)


def number_key(choice: Choice) -> tuple[str, str | None]:
    """``(name, spec)`` of a number quiz's choice ``name:spec``."""
    match = NUMBER_KEY.match(choice.text)
    return match["name"], match["spec"]


def tolerance_of(quiz: Quiz, shown: str) -> float:
    """How far a typed number may be from a choice's value: ``:tolerance:``, else half a unit of the last digit
    ``shown`` (the value as the page formats it) has."""
    if quiz.tolerance is not None:
        return quiz.tolerance
    decimals = len(shown.split(".", 1)[1]) if "." in shown else 0
    return 0.5 * 10.0 ** -decimals


def plain_markdown(quiz: Quiz, number: int, shown: dict[str, str] | None = None) -> str:
    """The quiz as plain Markdown for a notebook: question, choices, and the answer in a collapsed ``<details>``.

    ``shown``: ``{choice text: the number as shown}`` for a ``number`` quiz (its glued values, formatted).
    """
    parts = [f"**Check {number}.** {quiz.question}"] + ([quiz.prompt] if quiz.prompt else [])
    if quiz.kind == "choice":
        parts.append("\n".join(f"- **{LETTERS[i]}.** {c.text}" for i, c in enumerate(quiz.choices)))
        answers = [f"**{LETTERS[i]}. {'Right' if c.correct else 'Wrong'}.** {c.explanation}"
                   for i, c in enumerate(quiz.choices)]
    else:
        parts.append("*Your answer (a number):*")
        answers = [(f"**Answer: {shown[c.text]}.** " if c.correct else f"**If you got {shown[c.text]}:** ")
                   + c.explanation for c in sorted(quiz.choices, key=lambda c: not c.correct)]
    parts.append("<details><summary>Answer</summary>\n\n" + "\n\n".join(answers) + "\n\n</details>")
    return "\n\n".join(parts)
