"""Verdicts decided outside the student's process: each autograded test cell, hidden tests included, runs here.

The student's notebook runs in its sandboxed kernel with the *released* test cells (the visible tests: they help
the student, they are not the grade). Then each test cell of the instructor's source runs in this process, in
a namespace holding the chapter's own imports and, for every name the exercise asks the student to define, a
``Proxy`` that calls the student's function across the boundary (attncourse/boundary.py) and gets data back. The
comparisons (``np.testing``, ``torch.testing``, ``assert``) are this process's own, so whatever the student's
code patched in its kernel, a wrong value fails. The verdict becomes the test cell's outputs, which nbgrader
scores as always: a pass message (or a ``Credit``'s score), or the error that failed it.

Warnings: a warning the student's call emitted is raised again here, with its category. It costs points only
where the exercise's checks say it matters (a test that turns warnings into errors); nbgrader's rule
"anything on stderr scores 0" no longer applies, since the grade comes from the checks, not from stderr.

What the student's process reports about itself (a call's peak memory for ``tracemalloc``, the rule checks of
``attnlib.exercises.forbid`` and ``watch``, which must look at the student's function objects and at what they
call) is computed in that process and could be faked by a hostile answer; the values compared are not.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import tracemalloc
import warnings
from collections.abc import Iterator

import nbformat

import attnlib.exercises
from attncourse.boundary import StudentKernel
from attncourse.exercise_cells import chapter_number, exercise_name, nbgrader

OUTPUT_LIMIT = 20_000


def is_test(cell) -> bool:
    meta = nbgrader(cell)
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def student_names(source: nbformat.NotebookNode) -> set[str]:
    """The names the exercises ask for: what the source's answer cells define at their top level."""
    names = set()
    for cell in source.cells:
        if cell.cell_type != "code" or not nbgrader(cell).get("solution"):
            continue
        for node in _parse(cell.source).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def chapter_imports(source: nbformat.NotebookNode) -> dict:
    """A namespace with the chapter's own top-level imports (the instructor's code, not the student's)."""
    namespace: dict = {"__name__": "__verdict__"}
    for cell in source.cells:
        if cell.cell_type != "code" or nbgrader(cell):
            continue
        imports = [n for n in _parse(cell.source).body if isinstance(n, ast.Import | ast.ImportFrom)]
        if imports:
            exec(compile(ast.Module(body=imports, type_ignores=[]), "<chapter imports>", "exec"), namespace)  # noqa: S102
    return namespace


def _parse(source: str) -> ast.Module:
    """A cell's syntax tree, IPython magics and shell lines left out."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


class Proxy:
    """Stands for the student's function ``name``: a call runs in the student's kernel and returns data."""

    def __init__(self, kernel: StudentKernel, name: str):
        self.kernel, self.__name__, self.__qualname__ = kernel, name, name

    def __call__(self, *args, **kwargs):
        value, emitted, peak = self.kernel.call(self.__name__, args, kwargs, trace=tracemalloc.is_tracing())
        for category, message in emitted:
            kind = getattr(builtins, category, None)
            warnings.warn(message, kind if isinstance(kind, type) and issubclass(kind, Warning) else UserWarning,
                          stacklevel=2)
        if peak:
            bytearray(min(peak, 2**30))  # the student's peak, seen by this process's tracemalloc
        return value

    def __repr__(self) -> str:
        return f"<the student's {self.__name__}>"


@contextlib.contextmanager
def remote_rules(kernel: StudentKernel) -> Iterator[None]:
    """``attnlib.exercises.forbid`` and ``watch`` on a ``Proxy`` check the student's function in its own kernel."""
    original = attnlib.exercises.forbid

    def forbid(func, *, rule, names=(), operators=()):
        if not isinstance(func, Proxy):
            return original(func, rule=rule, names=names, operators=operators)
        found, _, _ = kernel.call("__boundary_violations", (func.__name__, list(names), list(operators)), {})
        assert not found, f"the exercise says: {rule}; {func.__name__} breaks it at " + ", ".join(map(str, found))
        return None

    watch = attnlib.exercises.watch

    def remote_watch(func, *args, **kwargs):  # the run happens in the student's kernel; its record comes as data
        if not isinstance(func, Proxy):
            return watch(func, *args, **kwargs)
        data, emitted, _ = kernel.call("__boundary_watch", (func.__name__, args, kwargs), {})
        for category, message in emitted:
            kind = getattr(builtins, category, None)
            warnings.warn(message, kind if isinstance(kind, type) and issubclass(kind, Warning) else UserWarning,
                          stacklevel=2)
        return attnlib.exercises.Run.from_data(func, data)

    attnlib.exercises.forbid, attnlib.exercises.watch = forbid, remote_watch
    try:
        yield
    finally:
        attnlib.exercises.forbid, attnlib.exercises.watch = original, watch


def run_check(source: str, namespace: dict) -> list[dict]:
    """Run a test cell here; its outputs as nbformat dicts: what it printed, the last expression's value, or
    the error that stopped it (type and message only: no line of the hidden tests)."""
    tree = _parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    printed, outputs = io.StringIO(), []
    try:
        with contextlib.redirect_stdout(printed), warnings.catch_warnings(record=True):
            warnings.simplefilter("always")  # kept here, unshown: a warning counts only where a check says so
            exec(compile(tree, "<test cell>", "exec"), namespace)  # noqa: S102 - the instructor's tests
            value = eval(compile(ast.Expression(last.value), "<test cell>", "eval"), namespace) if last else None  # noqa: S307
    except Exception as error:  # noqa: BLE001 - any failure of the checks is the verdict
        outputs.append(_stream(printed.getvalue()))
        message = str(error)[:OUTPUT_LIMIT]
        outputs.append({"output_type": "error", "ename": type(error).__name__, "evalue": message,
                        "traceback": [f"{type(error).__name__}: {message}"]})
        return [o for o in outputs if o]
    outputs.append(_stream(printed.getvalue()))
    if value is not None:
        outputs.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                        "data": {"text/plain": repr(value)}})
    return [o for o in outputs if o]


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text[:OUTPUT_LIMIT]} if text else {}


def chapter_cells(release: nbformat.NotebookNode) -> frozenset[str]:
    """The sources of the release's code cells that run no student code: the chapter's own, not its exercises'."""
    return frozenset(c.source for c in release.cells if c.cell_type == "code" and not nbgrader(c))


def released_tests(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with every locked cell as released (visible tests only), as nbgrader's OverwriteCells restores them
    from the source; a locked cell the student deleted is not put back (nbgrader's check reports it)."""
    released = {nbgrader(c).get("grade_id"): c for c in release.cells if nbgrader(c).get("locked")}
    for cell in nb.cells:
        gid = nbgrader(cell).get("grade_id")
        if gid in released:
            cell.source = released[gid].source
            cell.cell_type = released[gid].cell_type
            cell.metadata["nbgrader"] = dict(released[gid].metadata["nbgrader"])
    return nb


def verdicts(nb: nbformat.NotebookNode, source: nbformat.NotebookNode, kernel: StudentKernel) -> dict[str, list]:
    """``{grade_id: outputs}`` of every test cell of the source, run here against the student's kernel."""
    namespace = chapter_imports(source)
    namespace.update({name: Proxy(kernel, name) for name in student_names(source)})
    results = {}
    with remote_rules(kernel):
        for cell in source.cells:
            if is_test(cell):
                before = len(kernel.stops)
                results[nbgrader(cell)["grade_id"]] = run_check(cell.source, namespace)
                for stop in kernel.stops[before:]:
                    stop.where = nbgrader(cell)["grade_id"]
    for cell in nb.cells:
        gid = nbgrader(cell).get("grade_id")
        if gid in results:
            cell.outputs = [nbformat.from_dict(o) for o in results[gid]]
    return results


def exercise_label(assignment: str, where: str, nb: nbformat.NotebookNode) -> str:
    """``3.1`` for a stop inside exercise 1 of ``03_softmax`` (a cell index or a grade_id), else ``cell 12``."""
    gid = where
    if where.startswith("cell "):
        index = int(where.split()[1])
        gid = nbgrader(nb.cells[index]).get("grade_id", "") if 0 <= index < len(nb.cells) else ""
    name = exercise_name(gid) if gid else ""
    if name.startswith("ex") and chapter_number(assignment) is not None:
        return f"{chapter_number(assignment)}.{name[2:]}"
    return where
