"""The house style, checked on every attnlib module (with ``ast``, so nothing is imported or run).

* every public function, class and method has a docstring;
* a function that takes or returns tensors/arrays states their shapes in the project's legend,
  e.g. ``(B, H, Lq, Lk)``;
* no function is longer than 40 lines.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "attnlib"
MODULES = sorted(ROOT.rglob("*.py"))
MAX_LINES = 40
ARRAY_TYPES = re.compile(r"\b(Tensor|ndarray)\b")
# A parenthesised shape that uses the legend of attnlib/__init__.py: "(B, H, Lq, Lk)", "(..., L, D)", "(Dk,)".
SHAPE = re.compile(r"\([^()]*\b(B|H|L|Lq|Lk|Dk|Dv|D|N)\b[^()]*\)")


def _functions(tree):
    """Every function and method in a module, with its qualified name."""
    stack = [(node, "") for node in tree.body]
    while stack:
        node, prefix = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{node.name}", node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend((child, f"{prefix}{node.name}.") for child in node.body)


def _public(tree):
    """Public top-level functions and classes, and the public methods of public classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                yield from ((f"{node.name}.{m.name}", m) for m in node.body
                            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and not m.name.startswith("_"))


def _takes_or_returns_arrays(node) -> bool:
    args = node.args
    annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.annotation]
    annotations += [node.returns] if node.returns else []
    return any(ARRAY_TYPES.search(ast.unparse(a)) for a in annotations)


def _parse(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


IDS = [str(p.relative_to(ROOT.parent)) for p in MODULES]


def test_the_package_is_found():
    assert ROOT / "__init__.py" in MODULES and len(MODULES) >= 9


@pytest.mark.parametrize("path", MODULES, ids=IDS)
def test_public_names_have_docstrings(path):
    missing = [name for name, node in _public(_parse(path)) if not ast.get_docstring(node)]
    assert not missing, f"{path.name}: no docstring on {missing}"


@pytest.mark.parametrize("path", MODULES, ids=IDS)
def test_tensor_functions_state_their_shapes(path):
    tree = _parse(path)
    shapeless = [name for name, node in _public(tree)
                 if not isinstance(node, ast.ClassDef) and _takes_or_returns_arrays(node)
                 and not SHAPE.search(ast.get_docstring(node) or "")]
    assert not shapeless, f"{path.name}: docstrings without a shape like (B, Lq, D) on {shapeless}"


@pytest.mark.parametrize("path", MODULES, ids=IDS)
def test_no_function_is_longer_than_40_lines(path):
    long = {name: node.end_lineno - node.lineno + 1 for name, node in _functions(_parse(path))
            if node.end_lineno - node.lineno + 1 > MAX_LINES}
    assert not long, f"{path.name}: functions over {MAX_LINES} lines: {long}"


def test_the_checks_catch_what_they_should():
    bad = ast.parse('def f(x: "torch.Tensor") -> int:\n    """No shape here."""\n' + "    y = 1\n" * 40)
    assert [n for n, _ in _public(bad)] == ["f"] and _takes_or_returns_arrays(bad.body[0])
    assert not SHAPE.search("No shape here.") and SHAPE.search("(..., Lq, Dk) -> (B, H, Lq, Lk)")
    assert next(_functions(bad))[1].end_lineno > MAX_LINES
