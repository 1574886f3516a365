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
* A rule that asks for a call ("with **one call** to ``scaled_dot_product_attention``") is counted while the
  student's function runs: ``with calls(nops.scaled_dot_product_attention) as made: running_mean(v)``, then
  ``made.count``.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
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


class _Rules:
    """What a function refers to, resolved to the objects it means (see ``violations``)."""

    def __init__(self, names: Iterable[str], ops: dict):
        self.names, self.ops = set(names), ops
        self.found: list[str] = []
        self.seen: set[int] = set()

    def forbidden(self, obj, home: str) -> bool:
        """A module named (or inside a package named) in ``names``; a function or class of that name or
        from such a module, unless the student's own (defined in ``home``, the checked function's module)."""
        if inspect.ismodule(obj):
            return bool(self.names & set(obj.__name__.split(".")))
        if not callable(obj) or getattr(obj, "__module__", None) == home:
            return False
        module = getattr(obj, "__module__", None) or ""
        return getattr(obj, "__name__", None) in self.names or bool(self.names & set(module.split(".")))

    def flag(self, node: ast.AST, scope: _Scope, what: str | None = None) -> None:
        where = "" if scope.top else f"{scope.name} (called by it), "
        self.found.append(f"{where}line {node.lineno}: {what or ast.unparse(node)}")

    def check(self, func: Callable, top: bool = True) -> None:
        """Every use of a forbidden object, name or operator in ``func``, and in the functions of its own
        module that it calls (a helper cannot hide a forbidden call)."""
        if id(func) in self.seen:
            return
        self.seen.add(id(func))
        tree = _tree(func)
        scope = _Scope(func, _local_names(tree), top)
        for node in _outermost_references(tree):
            self._check_node(node, scope)

    def _check_node(self, node: ast.AST, scope: _Scope) -> None:
        if isinstance(node, ast.BinOp | ast.AugAssign):
            if type(node.op) in self.ops:
                self.flag(node, scope, f"the operator {self.ops[type(node.op)]}")
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            for obj in _imported(node):
                if self.forbidden(obj, scope.home):
                    self.flag(node, scope)
            return
        chain = _chain(node)
        objects = scope.resolve(chain) if chain else None
        if objects is None:  # a local name, or an attribute of a local value (a method): judged by its name
            last = node.attr if isinstance(node, ast.Attribute) else None
            if last in self.names:
                self.flag(node, scope)
            return
        if any(self.forbidden(obj, scope.home) for obj in objects):
            self.flag(node, scope)
        elif inspect.isfunction(objects[-1]) and objects[-1].__module__ == scope.home:
            self.check(objects[-1], top=False)


class _Scope:
    """Resolves the names a function uses: its locals stay unresolved, the rest come from its globals,
    closure and builtins."""

    def __init__(self, func: Callable, local: set[str], top: bool):
        func = inspect.unwrap(func)
        self.home, self.local, self.top = getattr(func, "__module__", None), local, top
        self.name = getattr(func, "__name__", repr(func))
        self.namespace = dict(vars(builtins))
        self.namespace.update(getattr(func, "__globals__", {}))
        closure = getattr(func, "__closure__", None) or ()
        for name, cell in zip(func.__code__.co_freevars if hasattr(func, "__code__") else (), closure, strict=False):
            try:
                self.namespace[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue

    def resolve(self, chain: list[str]) -> list | None:
        """``["np", "linalg", "norm"]`` -> the objects of each prefix; None when the first is local or unknown."""
        if chain[0] in self.local or chain[0] not in self.namespace:
            return None
        objects = [self.namespace[chain[0]]]
        for attr in chain[1:]:
            try:
                objects.append(getattr(objects[-1], attr))
            except Exception:  # noqa: BLE001 - an attribute only the running code creates
                return None
        return objects


def _chain(node: ast.AST) -> list[str] | None:
    """``np.linalg.norm`` -> ``["np", "linalg", "norm"]``; None for anything but names and attributes of names."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        base = _chain(node.value)
        return None if base is None else [*base, node.attr]
    return None


def _local_names(tree: ast.AST) -> set[str]:
    """Names the function binds itself: arguments, assignments, loop variables, nested defs, imports."""
    local = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            local.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            local.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            local.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    outer = tree.body[0] if isinstance(tree, ast.Module) and tree.body else None
    if isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
        local.discard(outer.name)  # the function itself, as a recursive call refers to it
    return local


def _outermost_references(tree: ast.AST):
    """Names, whole attribute chains (``np.linalg.norm``, not its parts), imports and operators, in order."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name | ast.Import | ast.ImportFrom) or (
                isinstance(node, ast.Attribute) and _chain(node) is not None):
            yield node
            continue
        if isinstance(node, ast.BinOp | ast.AugAssign | ast.Attribute):  # an attribute of a computed value
            yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _imported(node: ast.Import | ast.ImportFrom) -> list:
    """The modules and objects an import statement brings in (those that import here)."""
    found = []
    for alias in node.names:
        module = alias.name if isinstance(node, ast.Import) else node.module or ""
        try:
            imported = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - an import that fails fails the student's own code too
            continue
        found.append(imported)
        if isinstance(node, ast.ImportFrom) and hasattr(imported, alias.name):
            found.append(getattr(imported, alias.name))
    return found


def violations(func: Callable, names: Iterable[str] = (), operators: Iterable[str] = ()) -> list[str]:
    """Where ``func`` uses a forbidden name or operator: ``["line 3: np.cumsum", ...]`` (empty when none).

    Names are followed to what they mean: ``from attnlib.scores import additive_scores as addsc`` in the cell
    and ``addsc(...)`` in the function is a use of ``additive_scores``; a function the student defines
    under a forbidden name is theirs and is not one (its body is checked like the function's own).
    ``names`` may name modules (``torch`` forbids everything from torch), functions and classes, and
    methods (``backward``: any ``x.backward`` on a value the function computes)."""
    unknown = set(operators) - set(OPERATORS)
    if unknown:
        raise ValueError(f"expected operators among {sorted(OPERATORS)}, got {sorted(unknown)}")
    rules = _Rules(names, {OPERATORS[op]: op for op in operators})
    rules.check(func)
    return rules.found


def forbid(func: Callable, *, rule: str, names: Iterable[str] = (), operators: Iterable[str] = ()) -> None:
    """Raise AssertionError when ``func`` breaks the exercise's stated ``rule`` (a name or operator it may not use)."""
    found = violations(func, names, operators)
    assert not found, f"the exercise says: {rule}; {func.__name__} breaks it at " + ", ".join(found)


class _Calls:
    """How many times a function ran: ``count``, filled in by ``calls``."""

    def __init__(self, name: str):
        self.name, self.count = name, 0


@contextmanager
def calls(target: Callable) -> Iterator[_Calls]:
    """Count the calls of ``target`` made inside the block, however the code names it (an alias, a module's
    attribute, a helper calling it): ``with calls(nops.scaled_dot_product_attention) as made: ...``, then
    ``made.count``. A checked step (``@checked``) counts once per call, not once for its check and once for it."""
    code = inspect.unwrap(target).__code__  # the step itself: every @checked wrapper shares one code object
    made, previous = _Calls(getattr(target, "__name__", repr(target))), sys.getprofile()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code:
            made.count += 1
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        yield made
    finally:
        sys.setprofile(previous)


class Credit:
    """Partial credit for an exercise with separable parts; ``score()`` is the test cell's last expression."""

    def __init__(self, label: str, points: float):
        self.label, self.points = label, float(points)
        self.parts: list[tuple[str, float, str | None]] = []  # (name, points, failure or None)

    @contextmanager
    def part(self, name: str, points: float) -> Iterator[None]:
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
