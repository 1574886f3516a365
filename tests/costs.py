"""What a feature of the tests costs, measured where it runs and printed by ``make test`` at the end.

Some checks ride on work other tests already do (the visual check and its screenshots read the pages the
accessibility tests loaded; the hostile class is graded in one child process), and their issues ask how much
they add to ``make test``. A timed test would flake; instead the code that does the work adds up its CPU time
(every process it ran, Chromium included) and wall time here, one file per test process.
``tools/testrun.py`` sums the files (``tools.testsettings.cost_totals``) and prints each total beside the run's
own figures, with the share of the run's wall time that this CPU time makes on a machine as busy as the run
kept it. Nothing is asserted on these figures.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from tools.testsettings import COSTS as FOLDER  # tools/testrun.py empties it before a run and sums it after


def record(name: str, what: str, cpu_s: float, wall_s: float, count: int = 1, unit: str = "runs") -> None:
    """Add ``cpu_s`` and ``wall_s`` (and ``count`` items of work, counted in ``unit``) to ``name``'s total in
    this process's file; ``what`` says in words what was measured (printed as is)."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    path = FOLDER / f"{name}.{os.getpid()}.json"
    total = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"cpu_s": 0.0, "wall_s": 0.0,
                                                                                 "count": 0}
    total = {"what": what, "unit": unit, "cpu_s": total["cpu_s"] + cpu_s, "wall_s": total["wall_s"] + wall_s,
             "count": total["count"] + count}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(total), encoding="utf-8")
    tmp.replace(path)


def _tree_times(pid: int) -> dict[tuple[int, int], float]:
    """``{(pid, start tick): CPU seconds}`` of process ``pid`` and every process below it now alive (Linux
    ``/proc``, which shows a sandbox's processes too; empty elsewhere). The start tick tells a reused pid apart."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parents: dict[int, int] = {}
    used: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended while we looked
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) ": state ppid ... utime stime ... start
        parents[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = (int(fields[19]), (int(fields[11]) + int(fields[12])) / ticks)
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, up in parents.items() if up == parent and child not in tree]
        tree.update(children)
        frontier.extend(children)
    return {(p, used[p][0]): used[p][1] for p in tree if p in used}


def process_tree_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and every process below it now alive. What a process that
    already ended used is not counted: measure around work whose processes outlive it (a browser's renderer),
    or use ``Sampler`` for work that starts and ends processes."""
    return sum(_tree_times(pid).values())


class Sampler:
    """CPU seconds used by the processes below this one while the ``with`` block runs, Chromium, kernels and
    sandboxes included (a sandbox's processes are not waited for by their starter, so ``getrusage`` misses
    them): ``/proc`` is read every ``every`` seconds and each process's last reading kept, so a process that
    lives between two readings or ends just after one is undercounted by at most ``every`` seconds of CPU."""

    def __init__(self, every: float = 0.2):
        self.every, self.cpu_s, self.wall_s = every, 0.0, 0.0
        self._seen: dict[tuple[int, int], float] = {}
        self._done = threading.Event()

    def _read(self) -> None:
        for key, used in _tree_times(os.getpid()).items():
            if key[0] != os.getpid():
                self._seen[key] = max(used, self._seen.get(key, 0.0))

    def _loop(self) -> None:
        while not self._done.wait(self.every):
            self._read()

    def __enter__(self) -> Sampler:
        self._began = time.monotonic()
        self._read()
        self._before = dict(self._seen)  # what the processes alive now had used already
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self._read()
        self.wall_s = time.monotonic() - self._began
        self.cpu_s = sum(used - self._before.get(key, 0.0) for key, used in self._seen.items())
