"""Grading submissions: sandboxed workers execute and judge them, one coordinator writes the gradebook.

``make autograde`` grades here, one at a time (``JOBS=1``), on N worker processes of this machine (``JOBS=N``),
on a Dask ``LocalCluster`` (``DASK=local``) or an existing Dask cluster (``DASK=tcp://scheduler:8786``, e.g.
started on Slurm or PBS with dask-jobqueue). One code path for all of them:

* a **worker** (``grade_in_sandbox``) gets the assignment's source and release and the student's notebook as
  bytes (no shared disk); it runs the notebook in a sandboxed kernel (attncourse/sandbox.py, attncourse/boundary.py)
  that holds only that notebook, then runs every test cell, hidden tests included, in its own process
  against the student's functions across the boundary (attncourse/verdict.py). It never touches the course
  folder or the gradebook and sends back data: the graded notebook and what a limit stopped.
* the **coordinator** (this process, ``record``) runs nbgrader's own ``autograde`` on the course with the
  worker's notebook in place of nbgrader's ``Execute`` step (``Replay``): nbgrader writes the student, the
  submission and its timestamp, the scores (``SaveAutoGrades``) and the late penalty into ``gradebook.db``
  as in a run of its own, one submission at a time, so SQLite is never written by two processes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from attncourse.boundary import StudentKernel
from attncourse.coursedir import Course
from attncourse.sandbox import Limits, bwrap_works, sandboxed
from attncourse.verdict import chapter_cells, exercise_label, released_tests, verdicts

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


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
    """In place of nbgrader's ``Execute``: the notebook a worker has executed for this submission."""

    executed: dict[tuple[str, str, str], str] = {}  # (student, assignment, notebook) -> notebook JSON

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        key = (info["student"], info["assignment"], info["notebook"])
        if key not in self.executed:
            raise RuntimeError(f"no notebook executed by a worker for {key}")
        return nbformat.reads(self.executed.pop(key), as_version=4), resources


def replaying(course: Course):
    """nbgrader's API on the course with ``Replay`` in place of its ``Execute`` step (made once per grading)."""
    return course.api_with(lambda config: config.Autograde.update(autograde_preprocessors=[
        Replay if _name(s) == "Execute" else s
        for s in config.Autograde.get("autograde_preprocessors", _autograde_steps())]))


def record(grader, student: str, assignment: str, notebooks: dict[str, str]) -> dict:
    """Coordinator: nbgrader's autograde of one submission on the course (``grader``: ``replaying(course)``),
    with the worker's executions."""
    Replay.executed.update({(student, assignment, name): text for name, text in notebooks.items()})
    try:
        return grader.autograde(assignment, student, force=True, create=True)
    finally:
        for name in notebooks:
            Replay.executed.pop((student, assignment, name), None)


def _autograde_steps() -> list:
    from nbgrader.converters import Autograde  # noqa: PLC0415

    return list(Autograde.class_traits()["autograde_preprocessors"].default())


def _name(step) -> str:
    return step.rsplit(".", 1)[-1] if isinstance(step, str) else step.__name__


@contextmanager
def workers(jobs: int, dask: str | None) -> Iterator:
    """``(submit, as_completed)`` of this process (``jobs=1``), a pool of ``jobs`` worker processes, or a Dask
    cluster: ``dask`` is ``"local"`` (a LocalCluster of ``jobs`` processes) or a scheduler's address."""
    if dask is None and jobs <= 1:
        yield _here, iter
        return
    if dask is None:
        from concurrent.futures import ProcessPoolExecutor, as_completed  # noqa: PLC0415

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            yield pool.submit, as_completed
        return
    from distributed import Client, LocalCluster, as_completed  # noqa: PLC0415 - only for Dask runs

    if dask == "local":
        with LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=40) as cluster, Client(cluster) as client:
            yield client.submit, as_completed
    else:
        with Client(dask) as client:
            yield client.submit, as_completed


def _here(function, *args, **kwargs) -> Future:
    """Run ``function`` in this process, lazily, when its result is asked for (one at a time, in order)."""
    future = Future()
    future.result = lambda timeout=None: function(*args)  # type: ignore[method-assign]
    return future


def grade_many(course: Course, pairs: Iterable[tuple[str, str]], jobs: int = 1, dask: str | None = None,
               limits: Limits | None = None) -> Iterator:
    """Grade ``(student, assignment)`` pairs here or on workers, recording each as it comes back: yields each
    pair and nbgrader's result of recording it (a failed worker run is passed on as it is), with ``stops``.
    Workers return data; only this process (the coordinator) writes the gradebook and the course folder."""
    limits = limits or Limits()
    sandbox = sandboxed()  # refuses here, before any student code runs, when no sandbox can
    pairs = list(pairs)
    grader = replaying(course) if pairs else None
    with workers(jobs, dask) as (submit, as_completed):
        futures = {submit(grade_in_sandbox, s, a, task_files(course, s, a), limits, sandbox, **_pure(dask)): (s, a)
                   for s, a in pairs}
        for future in as_completed(list(futures)):
            student, assignment = futures[future]
            result = future.result()
            stops = result.get("stops", [])
            if result["success"]:
                result = dict(record(grader, student, assignment, result.pop("notebooks")))
            result["stops"] = stops
            yield (student, assignment), result


def _pure(dask: str | None) -> dict:
    """Dask caches a task by its arguments; a regrade of the same bytes must run again."""
    return {} if dask is None else {"pure": False}
