"""A sandbox for a student's code: bubblewrap (``bwrap``) namespaces plus ``prlimit`` limits, one per submission.

The student's kernel sees a read-only system (``/usr``, ``/etc``, ...), this Python and its venv, ``attnlib``
and nothing else of the machine: no instructor ``source/``, no other submission, no ``gradebook.db``, no
course folder, no home directory, no network (new user, pid, network, IPC and UTS namespaces). It may write
only its scratch folder (where its kernel's sockets live) and a private ``/tmp``. ``prlimit`` bounds its CPU
seconds, address space, processes/threads and the size of any file it writes; the grader bounds each cell's
wall time and the output it keeps. Where bubblewrap cannot run, ``require_sandbox`` refuses to grade unless
the instructor sets ``UNSAFE_NO_SANDBOX=1``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import attnlib

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


def _python_homes() -> list[Path]:
    """This Python's installation and its venv (a pyenv build may live in a home directory)."""
    homes = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    return sorted(homes)


def _library() -> Path:
    """The ``attnlib`` package folder (an editable install points into the repository, which also holds
    the chapters with their solutions: only the package itself is bound)."""
    return Path(attnlib.__file__).resolve().parent


NOBODY = 65534
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")


def bwrap_args(scratch: Path) -> list[str]:
    """bubblewrap's arguments: the read-only system, Python and attnlib, ``scratch`` writable, all else absent."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", str(NOBODY), "--gid", str(NOBODY)]  # inside, the student is nobody, with no capability
    for folder in SYSTEM:
        if Path(folder).is_symlink():
            args += ["--symlink", os.readlink(folder), folder]
        elif Path(folder).is_dir():
            args += ["--ro-bind", folder, folder]
    for folder in [*_python_homes(), _library()]:
        args += ["--ro-bind", str(folder), str(folder)]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
             "--bind", str(scratch), str(scratch), "--chdir", str(scratch),
             "--setenv", "HOME", str(scratch), "--setenv", "TMPDIR", "/tmp",
             # its parent is the namespace's init (pid 1: ipykernel polls no parent); bwrap ends it with the grader
             "--setenv", "JPY_PARENT_PID", "1"]
    return args


def prlimit_args(limits: Limits) -> list[str]:
    return ["prlimit", f"--cpu={limits.cpu_s}", f"--as={limits.memory}", f"--nproc={limits.processes}",
            f"--fsize={limits.file}", "--core=0", "--"]


@functools.cache
def bwrap_works() -> str | None:
    """None when bubblewrap runs a sandboxed Python here, else why not."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (make autograde installs it as root)"
    with _scratch_dir() as scratch:
        try:
            done = subprocess.run([*bwrap_args(scratch), sys.executable, "-c", "import attnlib"],
                                  capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bwrap did not start: {error}"
    if done.returncode != 0:
        return f"bwrap could not run a sandboxed Python (exit {done.returncode}): {done.stderr.strip()[:300]}"
    return None


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
            f"solution and hidden test and to write the gradebook, because {why}. Install bubblewrap, or run "
            f"with {UNSAFE_ENV}=1 to grade without a sandbox on your own risk.")
    return True


def kernel_argv(scratch: Path, limits: Limits, sandbox: bool) -> list[str]:
    """The command that starts a student's IPython kernel (``{connection_file}`` filled in by jupyter_client)."""
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    return prlimit_args(limits) + (bwrap_args(scratch) if sandbox else []) + kernel


def write_kernelspec(folder: Path, argv: list[str], env: dict[str, str]) -> str:
    """A kernelspec named ``student`` under ``folder/kernels``; its name."""
    spec = folder / "kernels" / "student"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": argv, "display_name": "student (sandboxed)", "language": "python", "env": env,
        "interrupt_mode": "message"}))  # a signal would reach bwrap, not the kernel inside it
    return "student"
