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

* **A rule the exercise states is checked on what the student's code does**, with one mechanism: ``watch`` runs
  the student's function once and records every call its code makes into a library (NumPy, torch, SciPy,
  attnlib), however it reached the function (an alias, ``sys.modules``, ``importlib``)::

      run = watch(running_mean, value)          # run.value: what running_mean returned
      run.forbid(rule="no cumulative sum", names=("cumsum", "mean"), modules=("torch",))
      assert run.count(nops.scaled_dot_product_attention) == 1       # "with one call to ..."
      np.testing.assert_allclose(run.value, run.results(nops.scaled_dot_product_attention)[0][0])  # "... from it"

  ``forbid`` raises ``AssertionError`` naming the rule and what broke it; it also reads the function's source
  for what a run cannot show (``operators=("@",)``, a NumPy ufunc called directly). Put a rule's check inside
  the ``Credit`` part it costs, or before the parts when breaking it leaves none of the exercise's work. Each
  rule gets a recorded shortcut answer in ``course/answers/`` that must lose its points.
  In the grader's process (``attncourse/verdict.py``) the student's function lives in a sandboxed kernel:
  ``watch`` on it runs there and brings back the record as data (``Run.data``), as ``forbid`` does.
* ``forbid(func, rule=..., names=..., operators=...)`` alone is the source check without a run (``violations``).
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
from dataclasses import dataclass, field

import numpy as np

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


@dataclass
class Call:
    """One call the student's code made into another module: ``name`` is ``module.qualname`` of what it called
    (``numpy._core.fromnumeric.cumsum``, ``torch._VariableFunctionsClass.tanh``, ``numpy.logaddexp.reduce``), and
    ``result`` what it returned (kept for calls into attnlib; None for the rest and for C functions)."""

    name: str
    result: object = None

    def matches(self, names: Iterable[str] = (), modules: Iterable[str] = ()) -> bool:
        """A part of the qualified name in ``names``, or the module (or a package above it) in ``modules``."""
        module, _, qualname = self.name.partition(":")
        return bool(set(qualname.split(".")) & set(names)) or any(
            module == m or module.startswith(m + ".") for m in modules)

    def __str__(self) -> str:
        return self.name.replace(":", ".")


@dataclass
class Run:
    """What one call of the student's function did (see ``watch``): ``value`` it returned, ``calls`` it made."""

    func: Callable
    value: object = None
    calls: list[Call] = field(default_factory=list)
    tampered: bool = False  # the code switched the recording off (sys.setprofile)

    def count(self, target: Callable) -> int:
        """How many times the student's code called ``target`` (however it named it)."""
        return len(self.results(target))

    def results(self, target: Callable) -> list:
        """What each of the student's calls of ``target`` returned, in order (``target`` an attnlib function)."""
        key = _key(target)
        return [call.result for call in self.calls if call.name == key]

    def forbid(self, *, rule: str, names: Iterable[str] = (), modules: Iterable[str] = (),
               operators: Iterable[str] = ()) -> None:
        """AssertionError naming ``rule`` when the run called a function named in ``names`` (``"cumsum"``, a method
        ``"mean"``) or anything from a module in ``modules`` (``"torch"``, ``"torch.nn.modules"``), or when the
        function's source uses such a name or one of ``operators`` (``"@"``): what a run cannot show (an operator
        on arrays, a NumPy ufunc called directly) is read from the source (``violations``)."""
        names, modules = tuple(names), tuple(modules)
        broken = [str(call) for call in self.calls if call.matches(names, modules)]
        broken = list(dict.fromkeys(broken))  # each function once, in the order of its first call
        assert not self.tampered, f"the exercise says: {rule}; {self.name} switched off the recording of its calls"
        assert not broken, f"the exercise says: {rule}; {self.name} called " + ", ".join(broken[:5])
        forbid(self.func, rule=rule, names=names + tuple(m for m in modules if "." not in m), operators=operators)

    @property
    def name(self) -> str:
        """The watched function's name, as a rule's message names it."""
        return getattr(self.func, "__name__", repr(self.func))

    def data(self) -> dict:
        """The run as data only (for ``attncourse/boundary.py``): the value, each call's name and sendable result."""
        return {"value": self.value, "tampered": self.tampered,
                "calls": [[call.name, call.result if _sendable(call.result) else None] for call in self.calls]}

    @classmethod
    def from_data(cls, func: Callable, data: dict) -> Run:
        """The run ``data()`` described, for ``func`` (the grader's stand-in for the student's function)."""
        return cls(func, data["value"], [Call(str(n), r) for n, r in data["calls"]], bool(data["tampered"]))


def watch(func: Callable, *args, **kwargs) -> Run:
    """Call ``func(*args, **kwargs)`` once and record every call its code makes into a module: a ``Run``.

    What counts as the student's code: ``func`` and whatever shares its globals (helpers, lambdas, nested
    functions of the same notebook or file), and code compiled outside any module (``exec``). A call from there
    into a library is recorded with its name and, for attnlib, its result, however the code reached the function
    (an alias, ``sys.modules``, ``importlib``, ``getattr``); what the library calls in turn is not. attnlib's
    ``@checked`` wrapper is looked through: a checked step is recorded under its own name. Exceptions and warnings
    of the call pass through unchanged.
    """
    recorder = _Recorder(getattr(inspect.unwrap(func), "__globals__", None))
    previous = sys.getprofile()
    recorder.previous = previous
    run, profile = Run(func), recorder.profile  # one bound method, to compare with sys.getprofile() after
    sys.setprofile(profile)
    try:
        run.value = func(*args, **kwargs)
    finally:
        run.tampered = sys.getprofile() != profile
        sys.setprofile(previous)
    run.calls = recorder.calls
    return run


class _Recorder:
    """The profile function ``watch`` installs, and what it has recorded."""

    def __init__(self, home: dict | None):
        self.home, self.previous = home, None
        self.calls: list[Call] = []
        self.open: dict[int, Call] = {}  # id(frame) of a recorded Python call -> its Call, until it returns
        self.wrappers: set[int] = set()  # id(frame) of @checked wrappers the student's code called

    def student(self, frame) -> bool:
        """Is ``frame`` running the student's code (the checked function's globals, or no module's)?"""
        space = frame.f_globals
        if space is self.home:
            return True
        module = sys.modules.get(space.get("__name__")) if isinstance(space.get("__name__"), str) else None
        return module is None or vars(module) is not space or module.__name__ == "__main__"

    def entered(self, frame) -> bool:
        """Is ``frame`` (not the student's) a function the student's code called itself, directly or through a
        ``@checked`` wrapper (recorded instead of the wrapper)?"""
        caller = frame.f_back
        if caller is None or self.student(frame):
            return False
        if id(caller) in self.wrappers:
            return frame.f_globals.get("__name__") not in ("attnlib._checks", "inspect")
        if not self.student(caller):
            return False
        if frame.f_globals.get("__name__") == "attnlib._checks" and frame.f_code.co_name == "public":
            self.wrappers.add(id(frame))
            return False
        return not frame.f_code.co_name.endswith("_dispatcher")  # NumPy's argument dispatchers: noise

    def profile(self, frame, event, arg):
        if event == "call" and self.entered(frame):
            call = Call(f"{frame.f_globals.get('__name__')}:{frame.f_code.co_qualname}")
            self.calls.append(call)
            if call.name.startswith("attnlib"):
                self.open[id(frame)] = call
        elif event == "return":
            self.wrappers.discard(id(frame))
            call = self.open.pop(id(frame), None)
            if call is not None:
                call.result = arg
        elif event == "c_call" and self.student(frame):
            self.calls.append(Call(_key(arg)))
        if self.previous is not None:
            self.previous(frame, event, arg)


def _key(func: Callable) -> str:
    """``module:qualname`` of a function, as ``watch`` records its calls (a @checked step under its own name; a
    method of a named object, such as a NumPy ufunc's ``reduce``, under that object's name)."""
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is not None:  # the module whose globals it runs in, as a frame of it says
        return f"{func.__globals__.get('__name__')}:{code.co_qualname}"
    owner = getattr(func, "__self__", None)
    module = getattr(func, "__module__", None)
    if module is None and owner is not None:
        kind = owner if isinstance(owner, type) else type(owner)
        module = owner.__name__ if inspect.ismodule(owner) else kind.__module__
    qualname = getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))
    if qualname.startswith("_") and module is not None:  # torch's _VariableFunctionsClass.tanh: torch.tanh
        qualname = getattr(func, "__name__", qualname)
    if owner is not None and not inspect.ismodule(owner) and isinstance(getattr(owner, "__name__", None), str):
        qualname = f"{owner.__name__}.{func.__name__}"
    return f"{module}:{qualname}"


def _sendable(value, depth: int = 0) -> bool:
    """Data that crosses ``attncourse/boundary.py`` (arrays, tensors, numbers, strings, lists, tuples, dicts)."""
    if depth > 20:
        return False
    if value is None or isinstance(value, bool | int | float | str | np.ndarray | np.generic):
        return True
    if type(value).__module__ == "torch" and type(value).__name__ == "Tensor":
        return True
    if isinstance(value, list | tuple):
        return all(_sendable(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _sendable(v, depth + 1) for k, v in value.items())
    return False


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
