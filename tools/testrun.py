"""``make test``: lint, the site build and every test, on every core, with a timing summary at the end;
``make check`` (``--check``): the quick part of it.

1. ``ruff check .``
2. At once: the book build (``jupyter-book build -W``; it executes nothing, the site shows the committed
   outputs) and pytest over attnlib's tests and the chapters (``--parts unit,notebooks``): every chapter
   under strict nbval, each executed once (its recorded exercise answers graded in the same kernel:
   the root conftest.py), and the chapters' float32 runs, spread over the cores by pytest-xdist
   (tools/pytest_scheduler.py says how).
3. As soon as the site is built, beside step 2: the browser tests (the site in headless Chromium; BertViz
   views; JupyterLab; the print edition) and the course tests (``--parts browser,course``). On their own
   they leave a core idle about half the time (each worker waits on its browser, its server or its
   kernel), so side by side the two runs keep every core busy; each run's output goes to a log in
   ``_build/test-times/`` and is printed once it has finished.

Each stage's wall time and CPU time (user + sys of its processes and the children they waited for: a
Chromium renderer that outlives its driver is not counted) are printed at the end, with the whole machine's
CPU time over the run (``/proc/stat``: everything, Chromium included) and the parts of the test run (unit,
notebooks, browser, course; see tools/testsettings.py), and the costs some tests measure of their own work
(tests/costs.py: the visual check and its screenshots, the hostile class) with the wall time they make. Usage:
``python tools/testrun.py [--workers N] [--check] [pytest arguments...]`` (extra arguments go to every pytest run).

``--check`` runs, on every core: ``ruff check .``, then one pytest run over the library's tests but those marked
slow or browser (``tests/lib``) and, under strict nbval, the chapters changed since ``main`` (committed or not;
none when none changed). What it leaves out, ``make test`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import testsettings as settings  # tools/testsettings.py, beside this script

REPO = settings.REPO
BIN = Path(sys.executable).parent
LOGS = REPO / "_build" / "test-times"


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

    def start(self) -> threading.Thread:
        out = self.log.open("w") if self.log else None
        began = time.monotonic()
        process = subprocess.Popen(self.command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT if out else None,
                                   env={**os.environ, **self.env})

        def wait():
            _, status, usage = os.wait4(process.pid, 0)  # the usage of the child and its waited-for descendants
            self.wall, self.cpu = time.monotonic() - began, usage.ru_utime + usage.ru_stime
            self.returncode = os.waitstatus_to_exitcode(status)
            process.returncode = self.returncode
            if out:
                out.close()

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        return thread

    def run(self) -> Stage:
        self.start().join()
        return self

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def pytest_stage(name: str, workers: int, parts: str, paths: list[str], extra: list[str]) -> Stage:
    times = LOGS / f"{name}.json"
    times.unlink(missing_ok=True)
    command = [str(BIN / "pytest"), *paths, "--parts", parts, "-n", str(workers), "--dist", "loadscope",
               "--no-loadscope-reorder", *extra]
    log = LOGS / f"{name.replace(' + ', '-')}.log"
    return Stage(name, command, log=log,
                 env={"ATTNLIB_TEST_TIMES": str(times), **settings.ONE_THREAD})


def parts(stages: list[Stage]) -> dict[str, tuple[float, float]]:
    """Per part: (wall span summed over the pytest stages, summed test time)."""
    found: dict[str, list[float]] = {}
    for stage in stages:
        path = LOGS / f"{stage.name}.json"
        if not path.is_file():
            continue
        for part, entry in json.loads(path.read_text(encoding="utf-8")).items():
            span, seconds = found.setdefault(part, [0.0, 0.0])
            found[part] = [span + entry["stop"] - entry["start"], seconds + entry["seconds"]]
    return {part: (span, seconds) for part, (span, seconds) in found.items()}


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores (0, 0 where /proc/stat is missing)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:8]]
    except (OSError, ValueError):
        return 0.0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def summary(total: float, lint: Stage, build: Stage, tests: list[Stage], workers: int,
            busy: tuple[float, float]) -> str:
    rows = [f"make test: {total:.0f} s wall in all ({workers} pytest workers per run; CPU = user + sys)"]
    if busy[1] > 0:
        rows.append(f"  the machine: {busy[0]:.0f} CPU-s busy of {busy[1]:.0f} ({100 * busy[0] / busy[1]:.0f}% "
                    f"of {os.cpu_count()} cores), every process included")
    for stage, what in [(lint, "lint"), (build, "build (beside the tests)"), *((s, s.name) for s in tests)]:
        state = "" if stage.ok else f"  FAILED (exit {stage.returncode})"
        rows.append(f"  {what:26s} {stage.wall:7.1f} s wall {stage.cpu:8.1f} s CPU{state}")
    rows.append("  parts of the test runs:    wall span   summed test time")
    for part, (span, seconds) in sorted(parts(tests).items(), key=lambda p: settings.PARTS.index(p[0])
                                        if p[0] in settings.PARTS else 99):
        rows.append(f"    {part:24s} {span:7.1f} s      {seconds:7.1f} s")
    measured = settings.cost_totals()
    if measured:
        cores = busy[0] / total if total > 0 and busy[1] > 0 else float(os.cpu_count() or 1)
        rows.append(f"  what features of the tests cost (tests/costs.py), and the wall time that CPU makes at this "
                    f"run's {cores:.2f} busy cores:")
        for entry in measured.values():
            rows.append(f"    {entry['what']}: {entry['count']} {entry['unit']}, {entry['cpu_s']:.1f} CPU-s "
                        f"(~{entry['cpu_s'] / cores:.0f} s of wall), {entry['wall_s']:.1f} s of the tests' own time")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=int(os.environ.get("TEST_WORKERS", os.cpu_count() or 1)),
                        help="pytest-xdist workers (default: TEST_WORKERS or the number of cores)")
    parser.add_argument("--check", action="store_true", help="only lint, fast library tests and changed chapters")
    args, extra = parser.parse_known_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    if args.check:
        return check(args.workers, extra)
    began, before = time.monotonic(), machine_cpu()
    shutil.rmtree(settings.COSTS, ignore_errors=True)  # the figures printed at the end are this run's alone

    lint = Stage("lint", [str(BIN / "ruff"), "check", "."]).run()
    build = Stage("build", [str(BIN / "jupyter-book"), "build", ".", "--warningiserror", "--keep-going"],
                  log=LOGS / "build.log")
    if not lint.ok:
        print("ruff found problems (above): fix them first", file=sys.stderr)
        return 1
    first = pytest_stage("unit + notebooks", args.workers, "unit,notebooks",
                         ["tests", settings.CHAPTERS, *settings.NBVAL], extra)
    second = pytest_stage("browser + course", args.workers, "browser,course", ["tests"], extra)
    stages = [first]
    waiting = {first.name: first.start(), build.name: build.start()}
    print(f"{first.name}: running beside the book build (log: {first.log.relative_to(REPO)})", flush=True)
    waiting[build.name].join()
    if build.ok:
        print(f"The book built in {build.wall:.0f} s (log: {build.log.relative_to(REPO)}); "
              f"{second.name}: running (log: {second.log.relative_to(REPO)})", flush=True)
        stages.append(second)
        waiting[second.name] = second.start()
    else:
        tail = build.log.read_text(encoding="utf-8", errors="replace").splitlines()[-60:]
        print("\n".join(["The book build failed; the last lines of its log:", *tail]), file=sys.stderr)
    for stage in stages:  # each stage's output once it has finished, so the two never interleave
        waiting[stage.name].join()
        print(f"\n===== {stage.name}: finished in {stage.wall:.0f} s =====", flush=True)
        print(stage.log.read_text(encoding="utf-8", errors="replace"), end="", flush=True)
    after = machine_cpu()
    busy = (after[0] - before[0], after[1] - before[1])
    print(summary(time.monotonic() - began, lint, build, stages, args.workers, busy), flush=True)
    return 0 if all(s.ok for s in [lint, build, *stages]) else 1


def check(workers: int, extra: list[str]) -> int:
    """``make check``: lint, then the library's fast tests and the changed chapters in one pytest-xdist run."""
    began = time.monotonic()
    lint = Stage("lint", [str(BIN / "ruff"), "check", "."]).run()
    if not lint.ok:
        print("ruff found problems (above): fix them first", file=sys.stderr)
        return 1
    chapters = settings.changed_chapters()
    print(f"make check: strict nbval on {', '.join(chapters) if chapters else 'no chapter'} "
          f"(changed since {settings.CHECK_BASE})", flush=True)
    paths = [settings.TIERS["lib"], *chapters, *(settings.NBVAL if chapters else ())]
    tests = Stage("tests", [str(BIN / "pytest"), *paths, "-m", settings.CHECK_MARKERS, "-q", "-n", str(workers),
                            "--dist", "loadscope", "--no-loadscope-reorder", *extra],
                  env=settings.ONE_THREAD).run()
    print(f"make check: {time.monotonic() - began:.0f} s wall (lint {lint.wall:.1f} s, tests {tests.wall:.1f} s "
          f"on {workers} workers)", flush=True)
    return 0 if tests.ok else 1


if __name__ == "__main__":
    sys.exit(main())
