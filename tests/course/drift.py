"""Numbers computed on one machine and read on another: the one tolerance the course tests allow.

The student releases (``course/release/``) are committed with the numbers of the machine that ran ``make student``
in their prose; the site and a student's kernel compute their own. Every CPU code path (``ATEN_CPU_CAPABILITY``),
BLAS and GPU adds in its own order, so a value that sits near a rounding boundary may be shown rounded the other
way: one unit of the last digit shown, no more. A trained model's results differ across CPU paths by more than
their float noise (issue #42's table: an in-context-learning score from -3.51 to -3.58), so the chapters show them
at a precision whose last digit covers that spread ("about -3.5"). Nothing else may differ: the words, and every
number's place, are compared exactly.
"""

from __future__ import annotations

import re

NUMBER = re.compile(r"[-−]?\d+(?:,\d{3})*(?:\.\d+)?")


def _value(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def _unit(text: str) -> float:
    """One unit of the last digit ``text`` shows (``0.25`` -> 0.01, ``1,024`` -> 1)."""
    return 10.0 ** -len(text.split(".")[1]) if "." in text else 1.0


def close(expected: str, got: str) -> bool:
    """Whether two shown numbers differ by at most one unit of the last digit either shows (and a hair more)."""
    return abs(_value(expected) - _value(got)) <= max(_unit(expected), _unit(got)) * (1 + 1e-9)


def difference(expected: str, got: str) -> str | None:
    """Where ``got`` differs from ``expected`` beyond one unit of a shown number's last digit (None: nowhere)."""
    words = (NUMBER.split(expected), NUMBER.split(got))
    numbers = (NUMBER.findall(expected), NUMBER.findall(got))
    if words[0] != words[1] or len(numbers[0]) != len(numbers[1]):
        at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b), min(map(len, words)))
        return f"the text differs at character {at}: {expected[at - 40:at + 40]!r} / {got[at - 40:at + 40]!r}"
    far = [(a, b) for a, b in zip(*numbers, strict=True) if not close(a, b)]
    return f"numbers differ by more than one unit of their last digit: {far}" if far else None
