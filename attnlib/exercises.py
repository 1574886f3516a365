"""What the chapters' exercise test cells use: one pass message, partial credit, stated rules checked.

Every test cell of every chapter ends the same way, so a student sees the same words everywhere:

* ``passed("Exercise 1.2")`` prints ``Exercise 1.2: tests passed`` after the asserts above it ran.
* An exercise with separable parts grades each part on its own (nbgrader's partial-credit convention:
  a test cell whose last expression is a number scores that number)::

      credit = Credit("Exercise 2.4", points=3)
      with credit.part("(a) shapes", 1):
          assert ...
      with credit.part("(b) values", 2):
          assert ...
      credit.score()          # last line: prints the pass message or what failed; returns the points

* A rule the exercise states ("without ``@``", "do not call ``split_heads``") is checked on the
  student's function, not trusted: ``forbid(func, names=("cumsum",), operators=("@",), rule="...")``
  raises ``AssertionError`` naming the rule and the line that broke it.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterable
from contextlib import contextmanager

OPERATORS = {"@": ast.MatMult, "*": ast.Mult, "+": ast.Add, "-": ast.Sub, "/": ast.Div, "**": ast.Pow}


def passed(label: str) -> None:
    """Print the one pass message every test cell ends with: ``<label>: tests passed``."""
    print(f"{label}: tests passed")


def _tree(func: Callable) -> ast.AST:
    """The syntax tree of ``func``'s source (dedented, so methods and nested functions parse)."""
    try:
        source = inspect.getsource(func)
    except (TypeError, OSError) as error:
        raise TypeError(f"expected a function defined in a notebook cell or a file, got {func!r}") from error
    return ast.parse(textwrap.dedent(source))


def _used_names(node: ast.AST) -> str | None:
    """The name a node refers to: ``x`` for ``Name``, ``cumsum`` for ``np.cumsum``; None otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations(func: Callable, names: Iterable[str] = (), operators: Iterable[str] = ()) -> list[str]:
    """Where ``func`` uses a forbidden name or operator: ``["line 3: np.cumsum", ...]`` (empty when none)."""
    names, operators = set(names), set(operators)
    unknown = operators - set(OPERATORS)
    if unknown:
        raise ValueError(f"expected operators among {sorted(OPERATORS)}, got {sorted(unknown)}")
    ops = {OPERATORS[op]: op for op in operators}
    found = []
    for node in ast.walk(_tree(func)):
        name = _used_names(node)
        if name in names:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in ops:
            found.append(f"line {node.lineno}: the operator {ops[type(node.op)]}")
    return found


def forbid(func: Callable, *, rule: str, names: Iterable[str] = (), operators: Iterable[str] = ()) -> None:
    """Raise AssertionError when ``func`` breaks the exercise's stated ``rule`` (a name or operator it may not use)."""
    found = violations(func, names, operators)
    assert not found, f"the exercise says: {rule}; {func.__name__} breaks it at " + ", ".join(found)


class Credit:
    """Partial credit for an exercise with separable parts; ``score()`` is the test cell's last expression."""

    def __init__(self, label: str, points: float):
        self.label, self.points = label, float(points)
        self.parts: list[tuple[str, float, str | None]] = []  # (name, points, failure or None)

    @contextmanager
    def part(self, name: str, points: float):
        """Run one part's asserts; any exception fails only this part, with its message recorded."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 - a student's crash costs this part only
            self.parts.append((name, float(points), f"{type(error).__name__}: {error}"))
        else:
            self.parts.append((name, float(points), None))

    def score(self) -> float:
        """Print the pass message, or each failed part and its reason; return the points earned."""
        total = sum(points for _, points, _ in self.parts)
        if abs(total - self.points) > 1e-9:
            raise ValueError(f"expected the parts of {self.label} to add up to {self.points:g} points, "
                             f"got {total:g}")
        failed = [(name, points, why) for name, points, why in self.parts if why is not None]
        if not failed:
            passed(self.label)
        for name, points, why in failed:
            print(f"{self.label} {name} failed ({points:g} points lost): {why}")
        return self.points - sum(points for _, points, _ in failed)
