"""Grading submissions: sandboxed workers execute and judge them, one coordinator writes the gradebook.

``make autograde`` grades in three ways, each where it earns its place: here, one submission after another
(``JOBS=1``: a plain loop), on N worker processes of this machine (``JOBS=N``: the standard library's
``ProcessPoolExecutor``), or on a Dask cluster (``DASK=tcp://scheduler:8786``, e.g. started on Slurm or PBS with
dask-jobqueue; ``DASK=local`` starts a ``LocalCluster`` here). The same two halves in every way:

* a **worker** (``grade_in_sandbox``) gets the assignment's source and release and the student's notebook as
  bytes (no shared disk); it runs the notebook in a sandboxed kernel (attncourse/sandbox.py, attncourse/boundary.py)
  that holds only that notebook, then runs every test cell, hidden tests included, in its own process
  against the student's functions across the boundary (attncourse/verdict.py). It never touches the course
  folder or the gradebook and sends back data: the graded notebook and what a limit stopped.
* the **coordinator** (this process, a ``Recorder``) runs nbgrader's own ``autograde`` on the course with the
  worker's notebook in place of nbgrader's ``Execute`` step (``Replay``, handed the notebook through nbgrader's own
  configuration): nbgrader writes the student, the submission and its timestamp, the scores (``SaveAutoGrades``)
  and the late penalty into ``gradebook.db`` as in a run of its own, one submission at a time, so SQLite is never
  written by two processes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Dict

from attncourse.boundary import StudentKernel
from attncourse.coursedir import Course
from attncourse.sandbox import ONE_THREAD, Limits, bwrap_works, sandboxed
from attncourse.verdict import chapter_cells, exercise_label, released_tests, verdicts


def task_files(course: Course, student: str, assignment: str) -> dict[str, bytes]:
    """What a worker needs from the course directory, ``{step: bytes}``: the assignment's ``source`` (for the
    checks, which run in the worker), its ``release`` (the visible tests) and the student's notebook
    (``submitted``)."""
    return {step: course.notebook(step, assignment, student).read_bytes()
            for step in ("source", "release", "submitted")}


def grade_in_sandbox(student: str, assignment: str, files: dict[str, bytes], limits: Limits, sandbox: bool) -> dict:
    """Worker: run the student's notebook in a sandboxed kernel that holds only that notebook, then decide every
    test cell here, outside it (attncourse/verdict.py). ``success``, ``log``, ``error``, ``notebooks`` (``{name:
    graded notebook JSON}``) and ``stops`` (``["3.1: stopped after 30 s", ...]``): data only."""
    os.environ.update({k: v for k, v in ONE_THREAD.items() if k not in os.environ})  # N kernels share the cores
    why = bwrap_works() if sandbox else None  # a Dask worker on another machine may lack bubblewrap
    if why:
        return {"success": False, "log": "", "error": f"this worker cannot sandbox student code: {why}", "stops": []}
    read = {name: nbformat.reads(data.decode("utf-8"), as_version=4) for name, data in files.items()}
    source, release = read["source"], read["release"]
    nb = released_tests(read["submitted"], release)
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
        kernel = StudentKernel(Path(scratch) / "student", limits, sandbox)
        try:
            kernel.run(nb, chapter_cells(release))
            verdicts(nb, source, kernel)
        except Exception as error:  # noqa: BLE001 - one submission's failure is reported, the class goes on
            return {"success": False, "log": "", "error": f"{type(error).__name__}: {error}", "stops": []}
        finally:
            kernel.close()
    stops = [f"{exercise_label(assignment, s.where, nb)}: {s.why}" for s in kernel.stops]
    return {"success": True, "log": "", "error": "", "stops": list(dict.fromkeys(stops)),
            "notebooks": {assignment: nbformat.writes(nb)}}


class Replay(NbGraderPreprocessor):
    """In place of nbgrader's ``Execute``: the notebook a worker has executed for this submission. ``executed`` is
    set in the configuration nbgrader builds this step from (``Recorder.record``): each autograde gets its own."""

    executed = Dict(help="{notebook name: notebook JSON} a worker executed for the submission being recorded").tag(
        config=True)

    def preprocess(self, nb, resources):
        name = resources["nbgrader"]["notebook"]
        if name not in self.executed:
            info = resources["nbgrader"]
            raise RuntimeError(f"no notebook executed by a worker for {info['student']}/{info['assignment']}/{name}")
        return nbformat.reads(self.executed[name], as_version=4), resources


class Recorder:
    """The coordinator's nbgrader: its own ``autograde`` on the course with ``Replay`` in place of ``Execute``
    (one API for a whole grading); ``record`` hands each submission's executed notebooks over and takes them back."""

    def __init__(self, course: Course):
        self.api = course.api_with(lambda config: config.Autograde.update(autograde_preprocessors=[
            Replay if _name(s) == "Execute" else s
            for s in config.Autograde.get("autograde_preprocessors", _autograde_steps())]))

    def record(self, student: str, assignment: str, result: dict) -> dict:
        """nbgrader's result of recording a worker's ``result`` (a failed one is passed on), with its ``stops``."""
        stops = result.get("stops", [])
        if result["success"]:
            self.api.config.Replay.executed = result["notebooks"]
            try:
                result = dict(self.api.autograde(assignment, student, force=True, create=True))
            finally:
                self.api.config.Replay.executed = {}
        return {**result, "stops": stops}


def _autograde_steps() -> list:
    from nbgrader.converters import Autograde  # noqa: PLC0415

    return list(Autograde.class_traits()["autograde_preprocessors"].default())


def _name(step) -> str:
    return step.rsplit(".", 1)[-1] if isinstance(step, str) else step.__name__


Task = tuple[str, str, dict, Limits, bool]  # grade_in_sandbox's arguments: student, assignment, files, limits, sandbox


def graded_here(tasks: Iterable[Task]) -> Iterator[tuple[Task, dict]]:
    """One after another, in this process."""
    for task in tasks:
        yield task, grade_in_sandbox(*task)


def graded_on_pool(tasks: Iterable[Task], jobs: int) -> Iterator[tuple[Task, dict]]:
    """On ``jobs`` worker processes of this machine, each result as it comes."""
    import multiprocessing  # noqa: PLC0415
    from concurrent.futures import ProcessPoolExecutor, as_completed  # noqa: PLC0415

    # workers forked from a clean server process: a child forked from this one inherits the ZeroMQ threads of any
    # kernel client it ran (make grade-bench grades with one worker first), and its kernel replies never arrived
    forkserver = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=forkserver) as pool:
        futures = {pool.submit(grade_in_sandbox, *task): task for task in tasks}
        for future in as_completed(futures):
            yield futures[future], future.result()


def graded_on_dask(tasks: Iterable[Task], address: str, jobs: int) -> Iterator[tuple[Task, dict]]:
    """On Dask: the scheduler at ``address``, or ``"local"``, a LocalCluster of ``jobs`` processes started here.
    ``pure=False``: Dask would reuse a result for the same arguments, and a regrade of the same bytes must run."""
    from distributed import Client, LocalCluster, as_completed  # noqa: PLC0415 - only for Dask runs

    with contextlib.ExitStack() as stack:
        if address == "local":
            address = stack.enter_context(LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                                       dashboard_address=None, silence_logs=40))
        client = stack.enter_context(Client(address))
        futures = {client.submit(grade_in_sandbox, *task, pure=False): task for task in tasks}
        for future in as_completed(list(futures)):
            yield futures[future], future.result()


def grade_many(course: Course, pairs: Iterable[tuple[str, str]], jobs: int = 1, dask: str | None = None,
               limits: Limits | None = None) -> Iterator:
    """Grade ``(student, assignment)`` pairs here (``jobs=1``), on ``jobs`` worker processes or on Dask (``dask``: an
    address or ``"local"``), recording each as it comes back: yields each pair and nbgrader's result of recording it
    (a failed worker run is passed on as it is), with ``stops``. Only this process writes the course folder."""
    limits = limits or Limits()
    sandbox = sandboxed()  # refuses here, before any student code runs, when no sandbox can
    pairs = list(pairs)
    if not pairs:
        return
    recorder = Recorder(course)
    tasks = ((s, a, task_files(course, s, a), limits, sandbox) for s, a in pairs)
    if dask is not None:
        done = graded_on_dask(tasks, dask, jobs)
    elif jobs > 1:
        done = graded_on_pool(tasks, jobs)
    else:
        done = graded_here(tasks)
    for (student, assignment, *_), result in done:
        yield (student, assignment), recorder.record(student, assignment, result)
