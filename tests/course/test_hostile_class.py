"""A hostile class, graded with the documented commands as an ordinary user: every trick fails (issue #31).

One assignment, ``03_softmax`` cut down to the imports and chapter 3's two autograded exercises (the real
answer and test cells, hidden tests included), and five students. Each trick is its own answer: a hostile
student puts one trick in her answer to 3.1 and another in her answer to 3.2, so every trick is checked by
what it alone would have done (a score, a file, a printed line). The tricks: patching ``np.testing``, writing
the gradebook and the course folder, silencing warnings, reading the course folder (``source/`` with the
hidden tests, the other students), an endless loop and a 60 MB print; plus an honest wrong answer and the
correct one. (Seven students, one per pair of answers, cost 6 more sandboxed kernels per way of grading,
each importing torch: about 27 CPU-s of ``make test`` for no trick more.) The class is graded once per way
of grading (``--jobs 1``, ``--jobs 2``, Dask through a scheduler's address) by
``python -m attncourse autograde`` (its ``main``, three times in one child process: one start-up of Python, torch
and nbgrader instead of three), as an ordinary user (under ``setpriv`` without root's DAC override when run as
root), with a per-cell limit of 2 s; the module fixture shares the three graded courses across the assertions. The
release is made here with ``attncourse.release`` (``make student`` itself is tested by test_course.py).

Where things live (issue #47): the grading runs from a copy of this repository under ``/tmp`` whose ``.venv`` is a
symlink to this checkout's venv (its Python, its attnlib and kit), on course folders beside it, all under a path
with spaces: where the sandbox once bound the venv and then hid it under its own ``/tmp``.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from attncourse.coursedir import Course
from attncourse.exercise_cells import BEGIN_SOLUTION, END_SOLUTION, nbgrader
from attncourse.release import release
from attncourse.sandbox import ONE_THREAD
from tests.course.placements import copy_of_repository, placed_folder, python_of
from tests.course.test_course import WITHOUT_DAC, overrides_permissions

pytestmark = pytest.mark.built  # the release takes chapter 3's numbers from the build's execution cache
ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "book" / "03_softmax.ipynb"
STEM = "03_softmax"
SETUP = "import warnings\n\nimport numpy as np\nimport torch\n\nfrom attnlib import numpy_ops as nops"  # 3's tests need
CELL_LIMIT_S = 2  # per answer cell, test cell or call (an honest one takes well under 0.1 s); the chapter's own
#                   cells (imports) get the default. The endless loop burns the whole limit in every mode.
# The Dask mode grades through a scheduler's address (``--dask tcp://…``, as on a cluster), with the worker a
# thread of the grading process: what it tests is that grading on Dask keeps the tricks out (the coordinator
# writes, the worker grades on scratch copies). A LocalCluster of 2 worker processes is tested by
# test_course.py; here each would be a fresh Python importing torch and nbgrader (about 16 CPU-s).
MODES = {"jobs 1": ["--jobs", "1"], "jobs 2": ["--jobs", "2"], "dask": ["--jobs", "1", "--dask", "in-process"]}
HIDDEN_LINE = "_rng = np.random.default_rng(3)"  # a line of 3.1's hidden tests

WRONG_LSE = "def logsumexp(x):\n    return np.zeros(np.shape(x)[:-1])\n"
WRONG_MASK = ("def sliding_window_mask(length, window):\n"
              "    offset = np.arange(length)[:, None] - np.arange(length)[None, :]\n"
              "    return (offset >= 0) & (offset <= window)\n")
WARNING_LSE = ("def logsumexp(x):\n    \"\"\"Right values, but log(0) warns on an all -inf row.\"\"\"\n"
               "    top = x.max(axis=-1, keepdims=True)\n    top = np.where(np.isfinite(top), top, 0.0)\n"
               "    return (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))[..., 0]\n")


def tricks(course: Path) -> dict[str, tuple[str, str]]:
    """``{student: (answer to 3.1, answer to 3.2)}``; ``course`` is the course folder the tricks aim at."""
    gradebook_file, pwned = course / "gradebook.db", course / "pwned.txt"
    return {
        # 3.1: a wrong answer that switches the checks off in its kernel; 3.2: a wrong answer that writes the
        # gradebook and the course folder, and runs `id`
        "patcher": (WRONG_LSE + "import torch\nnp.testing.assert_allclose = lambda *a, **k: None\n"
                    "np.testing.assert_array_equal = lambda *a, **k: None\n"
                    "torch.testing.assert_close = lambda *a, **k: None\n"
                    "import builtins\nbuiltins.AssertionError = type('Nothing', (Exception,), {})\n",
                    WRONG_MASK + "import sqlite3, os, subprocess\n"
                    f"try:\n    _db = sqlite3.connect({str(gradebook_file)!r})\n"
                    "    _db.execute('UPDATE grade SET manual_score = 99'); _db.commit()\n"
                    "except Exception as e:\n    print('no gradebook:', e)\n"
                    f"for _p in ({str(pwned)!r}, '../../pwned.txt', '../pwned.txt'):\n"
                    "    try:\n        open(_p, 'w').write('pwned')\n    except Exception as e:\n"
                    "        print('cannot write', _p, e)\n"
                    "print(subprocess.run(['id'], capture_output=True, text=True).stdout)\n"),
        # 3.1: an answer that warns, with warnings and stderr silenced; 3.2: the right answer, and a look
        # around the course folder for source/, the gradebook and the other students' notebooks
        "silencer": (WARNING_LSE + "import warnings, sys, os\nwarnings.filterwarnings('ignore')\n"
                     "warnings.warn = lambda *a, **k: None\nsys.stderr = open(os.devnull, 'w')\n",
                     model_answer("ex2") + "\nimport glob, os\n"
                     "_seen = glob.glob('../../../*/*') + glob.glob('../../../*/*/*')\n"
                     f"_seen += glob.glob({str(course)!r} + '/**', recursive=True)\n"
                     "print('SEEN', [p for p in _seen if os.path.exists(p) and "
                     f"({course.name!r} in p or 'gradebook' in p or '.ipynb' in p)])\n"
                     f"print('SOURCE', open({str(course / 'source' / STEM / f'{STEM}.ipynb')!r}).read()"
                     " if os.path.exists(" f"{str(course / 'source')!r}) else 'no source')\n"),
        "endless": ("while True:\n    pass\n" + WARNING_LSE, "print('x' * 60_000_000)\n" + model_answer("ex2")),
        "honest": (WRONG_LSE, WRONG_MASK),
        "correct": (None, None),
    }


def model_answer(exercise: str) -> str:
    """The model answer of ``exercise``: its answer cell, the solution markers left out."""
    cell = next(c for c in nbformat.read(CHAPTER, as_version=4).cells
                if nbgrader(c).get("grade_id") == f"{STEM}-{exercise}-solution")
    return "\n".join(line for line in cell.source.splitlines() if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION))


def tiny_chapter(book: Path) -> None:
    """``book/03_softmax.ipynb``: the imports its tests need and chapter 3's two autograded exercises as they are."""
    chapter = nbformat.read(CHAPTER, as_version=4)
    keep = [nbformat.v4.new_code_cell(SETUP)] + [
        c for c in chapter.cells if nbgrader(c).get("grade_id", "").split("-")[1:2] in (["ex1"], ["ex2"])]
    headings = {"ex1": "### Exercise 3.1: log-sum-exp (3 points)",
                "ex2": "### Exercise 3.2: a sliding window (2 points)"}
    cells = [nbformat.v4.new_markdown_cell("# 3. Softmax\n\n## Exercises")]
    for cell in keep:
        part = nbgrader(cell).get("grade_id", "").split("-")
        if part[-1:] == ["solution"]:
            cells.append(nbformat.v4.new_markdown_cell(headings[part[1]]))
        cells.append(cell)
    chapter.cells = cells
    nbformat.write(chapter, book / f"{STEM}.ipynb")


def submit(inbox: Path, course: Path, student: str, answers: tuple[str | None, str | None]) -> None:
    """The release with the student's answers (None: the model answer) in the two answer cells."""
    nb = nbformat.read(course / "release" / STEM / f"{STEM}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = nbgrader(cell).get("grade_id", "")
        for exercise, answer in zip(("ex1", "ex2"), answers, strict=True):
            if gid == f"{STEM}-{exercise}-solution":
                cell.source = answer if answer is not None else model_answer(exercise)
    path = inbox / student / STEM / f"{STEM}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


# ``python -m course`` once per mode, in one process: each command's exit status, printed output and seconds.
COMMANDS = """
import contextlib, io, json, sys, time
from attncourse.__main__ import main
results = {}
for mode, argv in json.loads(sys.argv[1]).items():
    printed, start = io.StringIO(), time.perf_counter()
    with contextlib.ExitStack() as stack:
        if argv[-1] == "in-process":  # a Dask cluster whose worker is a thread of this process, by its address
            from distributed import LocalCluster
            cluster = stack.enter_context(LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                                       dashboard_address=None, silence_logs=40))
            argv = [*argv[:-1], cluster.scheduler_address]
        stack.enter_context(contextlib.redirect_stdout(printed))
        stack.enter_context(contextlib.redirect_stderr(printed))
        status = main(argv)
    results[mode] = {"rc": status, "out": printed.getvalue(), "seconds": round(time.perf_counter() - start, 1)}
print(json.dumps(results))
"""


def as_user(commands: dict[str, list[str]], checkout: Path) -> dict[str, dict]:
    """``{name: python -m attncourse argv}`` run one after the other in one child process of ``checkout``'s Python,
    in that checkout (its attnlib and kit), that sees files as an ordinary user does (setpriv without the DAC
    override under root): ``{name: {"rc", "out", "seconds"}}``."""
    prefix = WITHOUT_DAC if overrides_permissions() else []
    env = {**os.environ, "COURSE_CELL_TIMEOUT": str(CELL_LIMIT_S), **ONE_THREAD}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([*prefix, str(python_of(checkout)), "-c", COMMANDS, json.dumps(commands)], cwd=checkout,
                          capture_output=True, text=True, timeout=1500, check=False, env=env)
    assert done.returncode == 0 and done.stdout.strip(), done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def graded() -> Iterator[dict]:
    """``{mode: {"course", "out", "rc", "seconds", "inbox_before", "inbox_after"}}``: the class graded once per
    way of grading, from a copy of this repository under /tmp whose .venv is a symlink to this one's, into course
    folders beside it (paths with spaces)."""
    with placed_folder("/tmp") as base:
        yield grade_the_class(base)


def grade_the_class(base: Path) -> dict:
    checkout = copy_of_repository(base / "the repository")
    book = base / "book"
    book.mkdir()
    tiny_chapter(book)
    released = base / "released"
    release(book, Course(released))
    results, commands = {}, {}
    for mode, flags in MODES.items():
        course, inbox = base / mode.replace(" ", "-"), base / f"inbox-{mode.replace(' ', '-')}"
        shutil.copytree(released, course)
        for student, answers in tricks(course).items():
            submit(inbox, course, student, answers)
        results[mode] = {"course": course, "inbox": inbox, "inbox_before": files_of(inbox)}
        commands[mode] = ["--book", str(book), "--course", str(course), "autograde", str(inbox), *flags]
    for mode, done in as_user(commands, checkout).items():
        results[mode].update(done, inbox_after=files_of(results[mode]["inbox"]))
    print("hostile class graded:", ", ".join(f"{mode} {run['seconds']} s" for mode, run in results.items()))
    return results


def exercise_scores(course: Path) -> dict[tuple[str, str], str]:
    with open(course / "exercises.csv", newline="") as f:
        return {(row["student"], row["exercise"]): row["score"] for row in csv.DictReader(f)}


EXPECTED = {  # (student, exercise) -> score
    **{(s, e): "0" for s in ("patcher", "honest") for e in ("ex1", "ex2")},
    ("silencer", "ex1"): "3", ("silencer", "ex2"): "2",  # 3.1 grades values: log(0) = -inf is right, and its
    #                                                      warning, silenced or not, costs nothing (#45); 3.2 is
    #                                                      right (its look around finds nothing and costs nothing)
    ("endless", "ex1"): "0", ("endless", "ex2"): "2",  # the loop is stopped; the 60 MB print costs nothing
    ("correct", "ex1"): "3", ("correct", "ex2"): "2",
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_trick_fails_and_the_correct_answer_keeps_full_marks(graded, mode):
    run = graded[mode]
    assert run["rc"] == 0, run["out"][-4000:]
    assert exercise_scores(run["course"]) == EXPECTED, run["out"][-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_endless_one_is_stopped_and_named(graded, mode):
    out = graded[mode]["out"]
    assert "STOPPED BY A LIMIT" in out, out[-3000:]
    assert f"endless 3.1: stopped after {CELL_LIMIT_S} s" in out, out[-3000:]
    stopped = json.loads((graded[mode]["course"] / "stopped.json").read_text())
    assert f"3.1: stopped after {CELL_LIMIT_S} s" in stopped[f"endless/{STEM}"]
    notebook = graded[mode]["course"] / "autograded" / "endless" / STEM / f"{STEM}.ipynb"
    assert notebook.stat().st_size < 2_000_000, "the 60 MB print was kept"
    assert "more characters cut by the grader" in notebook.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_sandbox_held_nothing_of_the_course(graded, mode):
    """The silencer's look around (3.2) saw no source/, no submission, no gradebook; the patcher's writes (3.2)
    reached nothing outside its scratch."""
    course = graded[mode]["course"]
    snoop = (course / "autograded" / "silencer" / STEM / f"{STEM}.ipynb").read_text()
    assert "SEEN []" in snoop and "SOURCE no source" in snoop, snoop[-3000:]
    for student in tricks(course):
        assert HIDDEN_LINE not in (course / "autograded" / student / STEM / f"{STEM}.ipynb").read_text()
    vandal = (course / "autograded" / "patcher" / STEM / f"{STEM}.ipynb").read_text()
    assert "no gradebook:" in vandal and "uid=65534" in vandal  # it ran as nobody, and found nothing to write
    assert not list(course.parent.rglob("pwned.txt"))
    assert graded[mode]["inbox_after"] == graded[mode]["inbox_before"]
    with Course(course).gradebook() as gb:
        assert all(g.manual_score is None for a in gb.assignments for s in a.submissions for n in s.notebooks
                   for g in n.grades)


@pytest.mark.slow
def test_every_way_of_grading_gives_the_same_sheet(graded):
    sheets = {mode: exercise_scores(run["course"]) for mode, run in graded.items()}
    assert sheets["jobs 2"] == sheets["jobs 1"] == sheets["dask"]


def test_autograde_refuses_without_a_sandbox(tmp_path, monkeypatch):
    """No bubblewrap: autograde refuses (saying why) unless UNSAFE_NO_SANDBOX=1."""
    from attncourse import sandbox  # noqa: PLC0415

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    sandbox.bwrap_works.cache_clear()
    try:
        monkeypatch.delenv(sandbox.UNSAFE_ENV, raising=False)
        with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap .* not installed.*UNSAFE_NO_SANDBOX=1"):
            sandbox.sandboxed()
        monkeypatch.setenv(sandbox.UNSAFE_ENV, "1")
        assert sandbox.sandboxed() is False
    finally:
        sandbox.bwrap_works.cache_clear()


def test_the_sandbox_overhead_is_measured():
    """What `make grade-bench` prints first: the sandbox's cost per kernel start, a few ms, far under a second
    (a shared machine's noise can make one pair negative, never the median far below 0)."""
    from attncourse import sandbox  # noqa: PLC0415

    assert -50 < sandbox.overhead_ms(pairs=5) < 1000


def test_a_reply_from_the_student_is_data_only(tmp_path):
    """What the student's kernel sends back is read without pickle: arrays, numbers, strings; an object array
    (which only pickle could rebuild) is refused, and an exception comes back as its built-in type by name."""
    import numpy as np  # noqa: PLC0415

    from attncourse.boundary import read_reply  # noqa: PLC0415

    reply = tmp_path / "reply-1"
    np.savez(reply.with_suffix(".npz"), a0=np.arange(3.0))
    reply.with_suffix(".json").write_text(json.dumps({"value": {"t": "tuple", "v": [
        {"t": "ndarray", "k": "a0"}, {"t": "float", "v": "-inf"}, {"t": "plain", "v": "ok"}]},
        "warnings": [["RuntimeWarning", "divide by zero"]], "peak": 0}))
    value, emitted, _ = read_reply(reply, "f")
    assert isinstance(value, tuple) and value[0].tolist() == [0.0, 1.0, 2.0] and value[1] == -np.inf
    assert value[2] == "ok" and emitted == [("RuntimeWarning", "divide by zero")]
    np.savez(reply.with_suffix(".npz"), a0=np.array([object()], dtype=object))
    reply.with_suffix(".json").write_text(json.dumps({"value": {"t": "ndarray", "k": "a0"}}))
    with pytest.raises(ValueError, match="allow_pickle"):
        read_reply(reply, "f")
    reply.with_suffix(".json").write_text(json.dumps({"raised": ["ZeroDivisionError", "no"]}))
    with pytest.raises(ZeroDivisionError, match="no"):
        read_reply(reply, "f")
