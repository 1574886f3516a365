"""``make test``: lint, the site build and every test, on every core, with each stage's time at the end;
``make check`` (``--check``): the quick part of it.

1. ``ruff check .``
2. At once: the book build (``jupyter-book build -W``, which executes every chapter through its cache) and pytest
   over every test that does not read what the build makes (``tests/lib tests/repo tests/book book tests/course``
   but the ``built`` marker): nbval runs every chapter once more, its kernels on torch's plain CPU path in float32
   (tools/testsettings.py's ``BOOK_RUN``), and grades the recorded exercise answers in the same kernels (the root
   conftest.py); the released chapters run in the students' environment, JupyterLab, the sandbox.
3. As soon as the site is built, beside step 2: the tests marked ``built`` (``tests/site``, which marks all its
   own, and the course tests that read the site or take the chapters' numbers from the build's execution cache).
   The build and the browser tests each leave a core idle much of the time (a kernel computes while Sphinx waits;
   a worker waits on its browser), so the runs side by side keep every core busy. Each run's output goes to a
   log in ``_build/test-times/`` and is printed once it has finished.

Each stage's wall time and CPU time (user + sys of its processes and the children they waited for) are printed
at the end, with the CPU time of the processes their parents left behind (the browsers: ``adopt_orphans``).
Usage: ``python tools/testrun.py [--workers N] [--check] [pytest arguments...]`` (extra arguments go to every
pytest run). ``--check`` runs ``ruff check .``, then one pytest run over the fast tests of
``tests/lib`` and ``tests/repo`` and the chapters changed since ``main``; ``make test`` runs the rest.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import testsettings as settings  # tools/testsettings.py, beside this script

REPO = settings.REPO
BIN = Path(sys.executable).parent
LOGS = REPO / "_build" / "test-times"
BUILT = "built"  # the marker of the tests that read what the build made (the site, its execution cache)


@dataclass
class Stage:
    """One command run as a child process: its exit status, wall time and CPU time."""

    name: str
    command: list[str]
    log: Path | None = None  # stdout/stderr go here instead of the terminal
    env: dict = field(default_factory=dict)
    returncode: int | None = None
    wall: float = 0.0
    cpu: float = 0.0
    pid: int = 0
    began: float = 0.0

    def start(self) -> Stage:
        out = self.log.open("w") if self.log else None
        self.began = time.monotonic()
        process = subprocess.Popen(self.command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT if out else None,
                                   env={**os.environ, **self.env})
        process.returncode = 0  # reaped by os.wait4 here, never by Popen
        self.pid = process.pid
        if out:
            out.close()  # the child has its own copy
        return self

    def finished(self, status: int, usage) -> None:
        """Record the exit ``os.wait4`` reaped: the usage of the child and its waited-for descendants."""
        self.wall, self.cpu = time.monotonic() - self.began, usage.ru_utime + usage.ru_stime
        self.returncode = os.waitstatus_to_exitcode(status)

    def run(self) -> Stage:
        _, status, usage = os.wait4(self.start().pid, 0)
        self.finished(status, usage)
        return self

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def adopt_orphans() -> None:
    """Become the subreaper of what this run starts (Linux's prctl PR_SET_CHILD_SUBREAPER): a process whose parent
    exits without reaping it, as chromedriver leaves its browser, is handed here, so os.wait4 counts its CPU time
    (without this, most of the browser tests' CPU time went uncounted)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


@dataclass
class Reaper:
    """The running stages, reaped in one loop with every orphan handed to this process (``orphans``: CPU-s)."""

    running: dict[int, Stage] = field(default_factory=dict)
    orphans: float = 0.0

    def start(self, stage: Stage) -> None:
        self.running[stage.start().pid] = stage

    def next_finished(self) -> Stage:
        """Wait until a stage exits; count the CPU time of the orphans that exit meanwhile."""
        while True:
            pid, status, usage = os.wait4(-1, 0)
            if pid in self.running:
                stage = self.running.pop(pid)
                stage.finished(status, usage)
                return stage
            self.orphans += usage.ru_utime + usage.ru_stime


def pytest_stage(name: str, workers: int, paths: list[str], extra: list[str]) -> Stage:
    command = [str(BIN / "pytest"), *paths, "-n", str(workers), "--dist", "loadscope", "--no-loadscope-reorder",
               *extra]
    return Stage(name, command, log=LOGS / f"{name.replace(' ', '-')}.log", env=settings.ONE_THREAD)


def kernel_env(env: dict) -> list[str]:
    """The root conftest.py's options that set ``env`` in the chapters' kernels only."""
    return [f"--kernel-env={name}={value}" for name, value in env.items()]


def summary(total: float, stages: list[Stage], orphans: float, workers: int) -> str:
    rows = [f"make test: {total:.0f} s wall in all ({workers} pytest workers per run; CPU = user + sys of each "
            "stage's processes and the children they waited for)"]
    for stage in stages:
        state = "" if stage.ok else f"  FAILED (exit {stage.returncode})"
        rows.append(f"  {stage.name:26s} {stage.wall:7.1f} s wall {stage.cpu:8.1f} s CPU{state}")
    rows.append(f"  {'orphans (browsers)':26s} {'':16s}{orphans:8.1f} s CPU")
    rows.append(f"  {'all':26s} {'':16s}{sum(s.cpu for s in stages) + orphans:8.1f} s CPU")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=int(os.environ.get("TEST_WORKERS", os.cpu_count() or 1)),
                        help="pytest-xdist workers (default: TEST_WORKERS or the number of cores)")
    parser.add_argument("--check", action="store_true", help="only lint, fast tests and changed chapters")
    args, extra = parser.parse_known_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    if args.check:
        return check(args.workers, extra)
    began = time.monotonic()
    lint = Stage("lint", [str(BIN / "ruff"), "check", "."]).run()
    if not lint.ok:
        print("ruff found problems (above): fix them first", file=sys.stderr)
        return 1
    # the build's kernels on one thread too, beside the tests: 219 CPU-s and 227 s instead of 410 and 417 with a core
    # busy beside it (two threads spin and wait for each other)
    build = Stage("build", [str(BIN / "jupyter-book"), "build", ".", "--warningiserror", "--keep-going"],
                  log=LOGS / "build.log", env=settings.ONE_THREAD)
    tiers = settings.TIERS
    first = pytest_stage("tests beside the build", args.workers, [
        tiers["lib"], tiers["repo"], tiers["book"], settings.CHAPTERS, tiers["course"], "-m", f"not {BUILT}",
        *settings.NBVAL, *kernel_env(settings.BOOK_RUN)], extra)
    second = pytest_stage("tests after the build", args.workers, [tiers["site"], tiers["course"], "-m", BUILT], extra)
    stages, reaper = [lint, build, first], Reaper()
    adopt_orphans()
    reaper.start(build)
    reaper.start(first)
    print(f"{first.name}: running beside the book build (logs: {LOGS.relative_to(REPO)})", flush=True)
    while reaper.running:  # each stage's output once it has finished, so the two never interleave
        stage = reaper.next_finished()
        if stage is build and build.ok:
            print(f"The book built in {build.wall:.0f} s; {second.name}: running", flush=True)
            stages.append(second)
            reaper.start(second)
        elif stage is not build:
            print(f"\n===== {stage.name}: finished in {stage.wall:.0f} s =====", flush=True)
            print(stage.log.read_text(encoding="utf-8", errors="replace"), end="", flush=True)
    if not build.ok:  # last, so that a log's tail (CI's) shows why
        print(build_problems(build.log), flush=True)
    print(summary(time.monotonic() - began, stages, reaper.orphans, args.workers), flush=True)
    return 0 if all(s.ok for s in stages) else 1


def build_problems(log: Path) -> str:
    """What made the build fail: Sphinx's warnings and errors (``--keep-going`` reports them at the end only by
    their count) and a failing cell's traceback, then the log's last lines."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    problems = [line for line in lines if re.search(r"WARNING:|ERROR:|CRITICAL:|Error|Traceback", line)
                and "Kernel is running over TCP" not in line]
    return "\n".join(["The book build failed. Its warnings and errors:", *problems[-40:], "Its last lines:",
                      *lines[-25:], f"(the whole log: {log.relative_to(REPO)})"])


def check(workers: int, extra: list[str]) -> int:
    """``make check``: lint, then the fast tests and the changed chapters in one pytest-xdist run."""
    began = time.monotonic()
    lint = Stage("lint", [str(BIN / "ruff"), "check", "."]).run()
    if not lint.ok:
        print("ruff found problems (above): fix them first", file=sys.stderr)
        return 1
    chapters = settings.changed_chapters()
    print(f"make check: nbval on {', '.join(chapters) if chapters else 'no chapter'} "
          f"(changed since {settings.CHECK_BASE})", flush=True)
    paths = [settings.TIERS["lib"], settings.TIERS["repo"], *chapters, *(settings.NBVAL if chapters else ())]
    tests = Stage("tests", [str(BIN / "pytest"), *paths, "-m", settings.CHECK_MARKERS, "-q", "-n", str(workers),
                            "--dist", "loadscope", "--no-loadscope-reorder", *extra],
                  env=settings.ONE_THREAD).run()
    print(f"make check: {time.monotonic() - began:.0f} s wall (lint {lint.wall:.1f} s, tests {tests.wall:.1f} s "
          f"on {workers} workers)", flush=True)
    return 0 if tests.ok else 1


if __name__ == "__main__":
    sys.exit(main())
