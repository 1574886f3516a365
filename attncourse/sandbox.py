"""A sandbox for a student's code: bubblewrap (``bwrap``) namespaces plus ``prlimit`` limits, one per submission.

The student's kernel sees a read-only system (``/usr``, ``/etc``, ...), this Python and its venv, ``attnlib``
and nothing else of the machine: no instructor ``source/``, no other submission, no ``gradebook.db``, no
course folder, no home directory, no network (new user, pid, network, IPC and UTS namespaces). It may write
only its scratch folder (where its kernel's sockets live) and a private ``/tmp``. ``prlimit`` bounds its CPU
seconds, address space, processes/threads and the size of any file it writes; the grader bounds each cell's
wall time and the output it keeps. Where bubblewrap cannot run, ``sandboxed`` refuses to grade (naming what the
sandbox could not see) unless the instructor sets ``UNSAFE_NO_SANDBOX=1``.

Wherever things live: the Python, its venv, attnlib and the scratch folder may be anywhere (``/tmp``, a home
directory, ``/srv``, a path with a space), and reached through symlinks (a checkout's ``.venv`` linked to another
checkout's). ``mounts`` binds each folder where it resolves to, recreates every symlink on the way to it, so the
paths Python computed for itself (``sys.prefix``, ``sys.executable``) still lead there, and orders the mounts
parents first, the namespace's own ``/tmp`` before anything bound under it, so no later mount hides an earlier one.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

UNSAFE_ENV = "UNSAFE_NO_SANDBOX"


@dataclass(frozen=True)
class Limits:
    """What one submission may use. ``cell_s``: wall seconds per answer cell, test cell and call of a student's
    function (an honest answer takes well under a second); ``chapter_cell_s``: per cell of the chapter's own,
    unchanged from the release (imports, a model's download from disk: seconds on a 2-core CPU, more on a busy
    one); ``cpu_s``: CPU seconds of the whole kernel; ``memory``: address space in bytes;
    ``processes``: processes and threads; ``file``: bytes of any one file written; ``output``: characters kept
    of one cell's output."""

    cell_s: float = 30.0
    chapter_cell_s: float = 180.0
    cpu_s: int = 600
    memory: int = 16 * 2**30
    processes: int = 512
    file: int = 64 * 2**20
    output: int = 100_000


class SandboxUnavailable(RuntimeError):
    """Bubblewrap cannot run here, and the instructor did not opt out of the sandbox."""


@dataclass(frozen=True)
class Interpreter:
    """The Python that runs a student's kernel, as paths: its executable and the folders it reads (the
    installation's and the venv's prefixes, as Python computed them: maybe through symlinks) and attnlib's folder."""

    executable: str
    prefixes: tuple[str, ...]
    library: str

    @classmethod
    def current(cls) -> Interpreter:
        """This process's Python (a kernel runs the grader's own interpreter and venv). attnlib is found, not
        imported: an editable install points into the repository, so only the package folder is bound."""
        spec = importlib.util.find_spec("attnlib")
        if spec is None or spec.origin is None:
            raise SandboxUnavailable("expected attnlib to be importable by the grader's Python, got none")
        prefixes = dict.fromkeys((sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix))
        return cls(sys.executable, tuple(prefixes), str(Path(spec.origin).parent))

    def folders(self) -> list[str]:
        """Every folder the kernel must see: the prefixes, the executable's folder and attnlib's."""
        return list(dict.fromkeys([*self.prefixes, os.path.dirname(self.executable), self.library]))


NOBODY = 65534
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
OWN = (("--proc", "/proc"), ("--dev", "/dev"), ("--tmpfs", "/tmp"))  # the namespace's own, empty or virtual


def _resolved(path: str) -> tuple[list[tuple[str, str]], str]:
    """``path`` resolved component by component: ``([(link, target), ...], real path)``, each symlink met on the
    way with what it points to (as written), so the sandbox can recreate it."""
    links, real = [], "/"
    for part in Path(os.path.abspath(path)).parts[1:]:
        step, hops = os.path.join(real, part), 0
        while os.path.islink(step) and hops < 40:
            target = os.readlink(step)
            links.append((step, target))
            step, hops = os.path.normpath(os.path.join(os.path.dirname(step), target)), hops + 1
        real = os.path.realpath(step)
    return links, real


def _system() -> list[tuple[str, ...]]:
    """The read-only system folders (a merged-/usr system's ``/bin`` is a symlink, recreated as one)."""
    found = []
    for folder in SYSTEM:
        if os.path.islink(folder):
            found.append(("--symlink", os.readlink(folder), folder))
        elif os.path.isdir(folder):
            found.append(("--ro-bind", folder, folder))
    return found


def mounts(interpreter: Interpreter, scratch: Path) -> list[tuple[str, ...]]:
    """bubblewrap's mount operations, ``(option, *paths)``, destination last: the namespace's own ``/proc``,
    ``/dev`` and ``/tmp``, the read-only system, the interpreter's folders read-only and ``scratch`` writable, each
    where it resolves to, behind the symlinks that lead to it; parents before children."""
    ops = [*OWN, *_system()]
    system = [op[-1] for op in ops if op[0] == "--ro-bind"]
    for folder, option in [*((f, "--ro-bind") for f in interpreter.folders()), (str(scratch), "--bind")]:
        links, real = _resolved(folder)
        ops += [("--symlink", target, link) for link, target in links]
        ops.append((option, real, real))
    bound = [op[-1] for op in ops if op[0] == "--ro-bind"]
    inside = {op for op in ops if op[0] == "--ro-bind" and op[-1] not in system
              and any(Path(op[-1]).is_relative_to(b) and op[-1] != b for b in bound)}  # already in a bound folder
    unique = [op for op in dict.fromkeys(ops) if op not in inside]
    return sorted(unique, key=lambda op: len(Path(op[-1]).parts))  # stable: the namespace's own first


def bwrap_args(scratch: Path, interpreter: Interpreter | None = None) -> list[str]:
    """bubblewrap's arguments: the read-only system, Python and attnlib, ``scratch`` writable, all else absent."""
    scratch = Path(_resolved(str(scratch))[1])
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", str(NOBODY), "--gid", str(NOBODY)]  # inside, the student is nobody, with no capability
    for op in mounts(interpreter or Interpreter.current(), scratch):
        args += op
    return args + ["--chdir", str(scratch), "--setenv", "HOME", str(scratch), "--setenv", "TMPDIR", "/tmp",
                   # its parent is the namespace's init (pid 1: ipykernel polls no parent); bwrap ends it with
                   # the grader
                   "--setenv", "JPY_PARENT_PID", "1"]


def prlimit_args(limits: Limits) -> list[str]:
    return ["prlimit", f"--cpu={limits.cpu_s}", f"--as={limits.memory}", f"--nproc={limits.processes}",
            f"--fsize={limits.file}", "--core=0", "--"]


# Run in the sandbox by ``bwrap_works`` with the kernel's environment: which of the folders it was given it cannot
# see, where it imports attnlib from, whether it finds ipykernel (json on stdout).
PROBE = """
import importlib.util, json, os, sys
attnlib = importlib.util.find_spec("attnlib")
print(json.dumps({"missing": [p for p in sys.argv[1:] if not os.path.isdir(p)],
                  "attnlib": os.path.dirname(attnlib.origin) if attnlib and attnlib.origin else None,
                  "ipykernel": importlib.util.find_spec("ipykernel") is not None}))
"""


@functools.cache
def bwrap_works(interpreter: Interpreter | None = None) -> str | None:
    """None when bubblewrap runs ``interpreter`` (default: this Python) sandboxed and it sees every folder it needs
    and imports the grader's attnlib, else why not, naming what it could not see."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (make autograde installs it as root)"
    interpreter = interpreter or Interpreter.current()
    with _scratch_dir() as scratch:
        try:
            done = subprocess.run([*bwrap_args(Path(scratch), interpreter), interpreter.executable, "-c", PROBE,
                                   *interpreter.folders()], capture_output=True, text=True, timeout=60, check=False,
                                  env={**os.environ, **kernel_env(interpreter)})
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bwrap did not start: {error}"
    return _probe_failure(interpreter, done)


def _probe_failure(interpreter: Interpreter, done: subprocess.CompletedProcess) -> str | None:
    """What the probe's run says the sandbox lacks (the paths it could not see by name), or None."""
    if done.returncode != 0:
        paths = [interpreter.executable, *interpreter.folders()]
        unseen = [path for path in paths if path in done.stderr or _resolved(path)[1] in done.stderr]
        what = f"the sandbox could not see {', '.join(dict.fromkeys(unseen))} " if unseen else ""
        return f"{what}(bwrap exit {done.returncode}: {done.stderr.strip()[:300]})"
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found["missing"]:
        return f"the sandbox could not see {', '.join(found['missing'])}"
    if found["attnlib"] is None or _resolved(found["attnlib"])[1] != _resolved(interpreter.library)[1]:
        return (f"the sandboxed Python ({interpreter.executable}) imports attnlib from {found['attnlib']}, expected "
                f"the grader's, {interpreter.library}")
    if not found["ipykernel"]:
        return f"the sandboxed Python ({interpreter.executable}) cannot import ipykernel: install it in its venv"
    return None


# Every kernel, the graders' and the tests', computes on one thread: N kernels share the cores, and torch on two
# threads beside another busy process spins and waits. One home: tools/testsettings.py takes it from here.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def kernel_env(interpreter: Interpreter | None = None) -> dict[str, str]:
    """The environment a student's kernel needs: attnlib's parent folder first on its path, so that it imports the
    grader's attnlib (a venv shared by two checkouts has the other's installed); inside the sandbox that folder
    holds attnlib alone (the rest of a checkout is not there)."""
    return {"PYTHONPATH": os.path.dirname((interpreter or Interpreter.current()).library)}


def _scratch_dir():
    import tempfile  # noqa: PLC0415

    return tempfile.TemporaryDirectory(prefix="sandbox-")


def overhead_ms(pairs: int = 15) -> float:
    """What the sandbox adds to starting a kernel: the median, over ``pairs`` alternating pairs, of how much
    longer ``python -c pass`` takes in bubblewrap with the limits than without (milliseconds, wall)."""
    import statistics  # noqa: PLC0415
    import time  # noqa: PLC0415

    def seconds(argv: list[str]) -> float:
        began = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
        return time.perf_counter() - began

    python = [sys.executable, "-c", "pass"]
    with _scratch_dir() as scratch:
        boxed = [*bwrap_args(Path(scratch)), *prlimit_args(Limits()), *python]
        return 1000 * statistics.median(seconds(boxed) - seconds(python) for _ in range(pairs))


def sandboxed() -> bool:
    """Whether student code runs in the sandbox: True, or False only when the instructor opted out; raises
    ``SandboxUnavailable`` (saying why) when bubblewrap cannot run and nobody opted out."""
    if os.environ.get(UNSAFE_ENV) == "1":
        return False
    why = bwrap_works()
    if why:
        raise SandboxUnavailable(
            f"refusing to autograde: student code would run with your permissions, able to read every "
            f"solution and hidden test and to write the gradebook, because {why}. Make the sandbox work "
            f"(bubblewrap installed, those folders readable), or run with {UNSAFE_ENV}=1 to grade without a sandbox "
            "on your own risk.")
    return True


def kernel_argv(scratch: Path, limits: Limits, sandbox: bool) -> list[str]:
    """The command that starts a student's IPython kernel (``{connection_file}`` filled in by jupyter_client)."""
    interpreter = Interpreter.current()
    kernel = [interpreter.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    return prlimit_args(limits) + (bwrap_args(scratch, interpreter) if sandbox else []) + kernel


def write_kernelspec(folder: Path, argv: list[str], env: dict[str, str]) -> str:
    """A kernelspec named ``student`` under ``folder/kernels``; its name."""
    spec = folder / "kernels" / "student"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": argv, "display_name": "student (sandboxed)", "language": "python", "env": env,
        "interrupt_mode": "message"}))  # a signal would reach bwrap, not the kernel inside it
    return "student"
