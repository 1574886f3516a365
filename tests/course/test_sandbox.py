"""The sandbox from anywhere (issue #47), and the boundary's data without a kernel.

* Mounts (no bubblewrap run): for a Python, venv, attnlib and scratch folder under ``/tmp``, a home folder or
  ``/srv``, with spaces, every folder is bound, the namespace's own ``/tmp`` comes before anything under it, and no
  mount hides an earlier one; a symlink on the way to a folder is recreated.
* Each place for real: a Python reached through a symlink under the place, a venv made from it there, attnlib in a
  "checkout" there (a ``.pth`` line, as an editable install has); bubblewrap's probe sees all of it, run as this
  account and, as root, without the DAC override (``setpriv``), as an ordinary user. A few tenths of a CPU-second
  each: no kernel starts (the hostile class and the scripted term grade from such places, test_hostile_class.py and
  test_course.py).
* A refusal names the path the sandbox could not see.
* The kernel's helper (attncourse/kernel_helper.py) against ``boundary.decode``, in this process.
* A kernel that drops its replies is given up on, not waited for; one lost reply stops only its cell (a
  kernel each, a few CPU-s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from attncourse import boundary, kernel_helper, sandbox
from attncourse.boundary import decode, read_reply
from attncourse.sandbox import Interpreter
from tests.course.placements import PLACES, ROOT, parent_in, placed_folder
from tests.course.test_course import WITHOUT_DAC, overrides_permissions


def hidden_by_a_later_mount(ops: list[tuple[str, ...]]) -> list[str]:
    """Destinations a later mount of the list covers (at the same path or a folder above it)."""
    hidden = []
    for i, op in enumerate(ops):
        later = [other[-1] for other in ops[i + 1:] if other[0] != "--symlink"]
        hidden += [f"{op[-1]} (under {path})" for path in later if Path(op[-1]).is_relative_to(path)]
    return hidden


@pytest.mark.parametrize("place", [*PLACES, "/tmp/a folder with spaces"])
def test_mounts_keep_every_folder_visible(place):
    home = f"{place}/python home"
    interpreter = Interpreter(f"{place}/venv/bin/python", (home, f"{place}/venv"), f"{place}/my checkout/attnlib")
    scratch = Path("/tmp/grade-x/student")
    ops = sandbox.mounts(interpreter, scratch)
    bound = [op[-1] for op in ops if op[0] in ("--ro-bind", "--bind")]
    for folder in [*interpreter.folders(), str(scratch)]:
        assert any(Path(folder).is_relative_to(b) for b in bound), f"{folder} is not bound: {ops}"
    assert hidden_by_a_later_mount(ops) == [], ops
    assert ops.index(("--tmpfs", "/tmp")) < min(i for i, op in enumerate(ops) if op[-1].startswith("/tmp/"))
    assert ("--bind", str(scratch), str(scratch)) in ops  # writable; the interpreter's folders are read-only
    assert all(op[0] == "--ro-bind" for op in ops if op[-1] in interpreter.folders())


def test_a_symlink_on_the_way_is_recreated_and_its_target_bound(tmp_path):
    real = tmp_path / "elsewhere" / "venv"
    real.mkdir(parents=True)
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / ".venv").symlink_to(real)
    interpreter = Interpreter(str(tmp_path / "checkout" / ".venv" / "bin" / "python"),
                              (str(tmp_path / "checkout" / ".venv"),), str(tmp_path / "attnlib"))
    ops = sandbox.mounts(interpreter, tmp_path / "scratch")
    assert ("--symlink", str(real), str(tmp_path / "checkout" / ".venv")) in ops
    assert ("--ro-bind", str(real), str(real)) in ops
    assert hidden_by_a_later_mount(ops) == []


# --- each place for real: bubblewrap's probe ----------------------------------------------------------------

DESCRIBE = """
import importlib.util, json, os, sys
spec = importlib.util.find_spec("attnlib")
print(json.dumps([sys.executable, list(dict.fromkeys((sys.base_prefix, sys.base_exec_prefix, sys.prefix,
                  sys.exec_prefix))), os.path.dirname(spec.origin)]))
"""


def interpreter_of(python: Path) -> Interpreter:
    """What the sandbox binds for ``python`` (its ``Interpreter.current()``, read by running it)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run([str(python), "-c", DESCRIBE], capture_output=True, text=True, check=True, timeout=60,
                          cwd=python.parents[2], env=env)  # not this checkout's folder: it holds attnlib too
    executable, prefixes, library = json.loads(done.stdout)
    return Interpreter(executable, tuple(prefixes), library)


def placed_python(folder: Path) -> Path:
    """Under ``folder``: ``python home`` (a symlink to this Python's installation), a venv made from it, and attnlib
    in ``my checkout``, on the venv's path through a ``.pth`` line; ipykernel copied in. The venv's Python."""
    home = folder / "python home"
    home.symlink_to(Path(sys.base_prefix).resolve(), target_is_directory=True)
    base = home / Path(sys._base_executable).resolve().relative_to(Path(sys.base_prefix).resolve())
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(folder / "venv")], check=True, timeout=120)
    (site,) = (folder / "venv" / "lib").glob("python3*/site-packages")
    shutil.copytree(ROOT / "attnlib", folder / "my checkout" / "attnlib", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "my_checkout.pth").write_text(str(folder / "my checkout") + "\n")
    shutil.copytree(Path(__import__("ipykernel").__file__).parent, site / "ipykernel",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder / "venv" / "bin" / "python"


def probe_as_an_ordinary_user(interpreter: Interpreter) -> str | None:
    """``bwrap_works`` for ``interpreter`` in a child that sees files as an ordinary user (root without its DAC
    override)."""
    code = ("import json, sys\nfrom attncourse.sandbox import Interpreter, bwrap_works\n"
            "executable, prefixes, library = json.loads(sys.argv[1])\n"
            "print(json.dumps(bwrap_works(Interpreter(executable, tuple(prefixes), library))))")
    argument = json.dumps([interpreter.executable, list(interpreter.prefixes), interpreter.library])
    done = subprocess.run([*WITHOUT_DAC, sys.executable, "-c", code, argument], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("place", PLACES)
def test_the_sandbox_sees_a_python_venv_and_checkout_placed_anywhere(place):
    with placed_folder(place) as folder:
        interpreter = interpreter_of(placed_python(folder))
        assert all(path.startswith(str(folder)) for path in [interpreter.executable, *interpreter.prefixes,
                                                             interpreter.library]), interpreter
        assert sandbox.bwrap_works(interpreter) is None
        if overrides_permissions():
            assert probe_as_an_ordinary_user(interpreter) is None


def test_a_refusal_names_the_path_the_sandbox_could_not_see(tmp_path):
    this = Interpreter.current()
    gone = Interpreter(this.executable, this.prefixes, str(tmp_path / "gone" / "attnlib"))
    assert f"could not see {tmp_path / 'gone' / 'attnlib'}" in sandbox.bwrap_works(gone)
    missing = Interpreter(str(tmp_path / "no venv" / "bin" / "python"), this.prefixes, this.library)
    assert f"could not see {tmp_path / 'no venv' / 'bin'}" in sandbox.bwrap_works(missing)  # its folder


def test_the_refusal_to_grade_carries_the_reason(monkeypatch):
    monkeypatch.delenv(sandbox.UNSAFE_ENV, raising=False)
    monkeypatch.setattr(sandbox, "bwrap_works", lambda: "the sandbox could not see /srv/x/venv")
    with pytest.raises(sandbox.SandboxUnavailable, match="refusing to autograde.*could not see /srv/x/venv"):
        sandbox.sandboxed()


def test_the_kernel_imports_the_grader_s_attnlib():
    """Its parent folder first on the kernel's path: inside the sandbox that folder holds attnlib alone."""
    this = Interpreter.current()
    assert sandbox.kernel_env(this) == {"PYTHONPATH": str(Path(this.library).parent)}
    assert Path(this.library).parent == ROOT  # this checkout's (the copy's, run from a copy)


def test_place_parents_exist():
    assert all(parent_in(place).is_dir() for place in ("/tmp", "/home")) and os.access("/tmp", os.W_OK)


# --- the kernel's helper, without a kernel ------------------------------------------------------------------

ENCODE = getattr(kernel_helper, "__boundary_encode")  # noqa: B009 - its name starts with two underscores
CALL = getattr(kernel_helper, "__boundary_call")  # noqa: B009


def round_trip(value, tmp_path: Path):
    """``value`` encoded as the kernel's helper writes it, read back as the grader reads it."""
    arrays = {}
    node = ENCODE(value, arrays)
    np.savez(tmp_path / "reply.npz", **arrays)
    with np.load(tmp_path / "reply.npz", allow_pickle=False) as loaded:
        return decode(json.loads(json.dumps(node)), loaded)


def test_the_helper_s_encoding_decodes_to_the_same_data(tmp_path):
    value = {"weights": np.arange(6.0).reshape(2, 3), "tensor": torch.tensor([[1.0, -2.0]]), "n": 3, "x": -np.inf,
             "scalar": np.float32(0.5), "parts": (None, True, "text", [1.5, np.int64(7)])}
    back = round_trip(value, tmp_path)
    assert set(back) == set(value)
    np.testing.assert_array_equal(back["weights"], value["weights"])
    assert isinstance(back["tensor"], torch.Tensor) and torch.equal(back["tensor"], value["tensor"])
    assert back["n"] == 3 and type(back["n"]) is int and back["x"] == -np.inf
    assert back["scalar"] == np.float32(0.5) and back["scalar"].dtype == np.float32
    assert back["parts"][:3] == (None, True, "text") and back["parts"][3] == [1.5, 7]
    with pytest.raises(TypeError, match="a result of type object cannot be graded"):
        ENCODE(object(), {})
    with pytest.raises(TypeError, match="nests too deeply"):
        ENCODE(eval("[" * 30 + "]" * 30), {})  # noqa: S307 - a literal


class _Shell:
    def __init__(self, user_ns):
        self.user_ns = user_ns


def test_a_call_through_the_helper_comes_back_as_data(tmp_path, monkeypatch):
    """``__boundary_call`` as the kernel runs it (its namespace faked), read back by ``read_reply``: the value, the
    warnings, an exception by its built-in type."""
    import warnings  # noqa: PLC0415

    import IPython  # noqa: PLC0415

    def scaled(x, factor=2.0):
        warnings.warn("scaled!", RuntimeWarning, stacklevel=1)
        return x * factor, {"sum": float(np.sum(x))}

    def broken(x, factor):
        raise ZeroDivisionError("no")

    monkeypatch.setattr(IPython, "get_ipython", lambda: _Shell({"scaled": scaled, "broken": broken}))
    request, reply = tmp_path / "call.pkl", tmp_path / "reply"
    request.write_bytes(__import__("pickle").dumps(((np.ones(3),), {"factor": 3.0}, False)))
    CALL("scaled", str(request), str(reply))
    (array, extra), emitted, peak = read_reply(reply, "scaled")
    np.testing.assert_array_equal(array, np.full(3, 3.0))
    assert extra == {"sum": 3.0} and emitted == [("RuntimeWarning", "scaled!")] and peak == 0
    CALL("broken", str(request), str(reply))
    with pytest.raises(ZeroDivisionError, match="no"):
        read_reply(reply, "broken")
    CALL("missing", str(request), str(reply))
    with pytest.raises(NameError, match="'missing' is not defined"):
        read_reply(reply, "missing")


# --- a kernel that does not answer --------------------------------------------------------------------------

DROP_REPLIES = """import IPython
_session = IPython.get_ipython().kernel.session
_send = _session.send
_session.send = lambda stream, kind, *a, **k: None if kind == "execute_reply" else _send(stream, kind, *a, **k)
"""
# the reply of this cell is lost, as the endless loop's once was; the kernel answers again afterwards
DROP_ONE_REPLY = """import IPython
_session = IPython.get_ipython().kernel.session
_send = _session.send
def _drop_once(stream, kind, *a, **k):
    if kind != "execute_reply":
        return _send(stream, kind, *a, **k)
    _session.send = _send
_session.send = _drop_once
"""


def run_with(tmp_path: Path, patch: str) -> tuple[boundary.StudentKernel, nbformat.NotebookNode, float]:
    """Cells ``x = 1``, ``patch``, ``x = 2`` in a sandboxed kernel with 1 s per cell and 2 s of grace: the kernel
    (closed), the executed notebook and the seconds it took."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(patch),
                                         nbformat.v4.new_code_cell("x = 2")])
    kernel = boundary.StudentKernel(tmp_path / "student", sandbox.Limits(cell_s=1.0))
    began = time.monotonic()
    try:
        kernel.run(nb)
        if kernel.dead:
            with pytest.raises(boundary.StudentError, match="kernel was stopped by a limit"):
                kernel.call("f", (), {})
    finally:
        kernel.close()
    return kernel, nb, time.monotonic() - began


@pytest.mark.slow
def test_a_kernel_that_stops_answering_is_given_up_on(tmp_path, monkeypatch):
    """A student's cell that patches the kernel's execute replies away (nbclient would wait for them forever): the
    cell is stopped at its limit and, once its interrupt went unanswered for the grace period and a cell of the
    grader's gets no answer either, the kernel counts as dead: the later cells do not run and a call says why,
    instead of the grading hanging."""
    monkeypatch.setattr(boundary, "INTERRUPT_GRACE_S", 2.0)
    kernel, nb, seconds = run_with(tmp_path, DROP_REPLIES)
    assert [(s.where, s.why) for s in kernel.stops] == [
        ("cell 1", "stopped after 1 s"), ("cell 1", "the kernel stopped answering (2 s after its interrupt)")]
    assert kernel.dead and nb.cells[0].execution_count == 1 and nb.cells[2].execution_count is None
    assert seconds < 120, "the grader waited far past the limits"


@pytest.mark.slow
def test_one_lost_reply_stops_its_cell_and_grading_goes_on(tmp_path, monkeypatch):
    """One reply that never comes (make test once hung on it: an endless loop, interrupted, the kernel idle): that
    cell is stopped at its limit, the kernel answers the grader's own cell, and the next cells run."""
    monkeypatch.setattr(boundary, "INTERRUPT_GRACE_S", 2.0)
    kernel, nb, seconds = run_with(tmp_path, DROP_ONE_REPLY)
    assert [(s.where, s.why) for s in kernel.stops] == [("cell 1", "stopped after 1 s")]
    assert not kernel.dead and nb.cells[2].execution_count is not None
    assert seconds < 120, "the grader waited far past the limits"
