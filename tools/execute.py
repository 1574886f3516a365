"""``make execute``: run chapters in place and store their outputs, as strict nbval will run them.

The site shows the outputs stored in ``book/*.ipynb`` and ``make test`` compares every one with a fresh run
(strict nbval), so after changing a chapter or attnlib, execute the chapters it touches and commit them:

    make execute                           # every notebook in book/, two at a time (one per core)
    make execute NB="book/03_softmax.ipynb book/04_weighted_sums.ipynb"

Each notebook runs in a fresh kernel from its own folder with the environment nbval gives the kernels
(tools/testsettings.py's ``ONE_THREAD``, as the root conftest.py gives them), so the stored last digits are the ones
nbval computes.

Then strict nbval runs the executed notebooks under each other CPU code path torch offers on this machine
(``ATEN_CPU_CAPABILITY``: ``default`` and ``avx2`` on an AVX2 CPU, also ``avx512`` on an AVX-512 one; the
execution itself took the widest): a stored output that only one code path reproduces fails here, on the
author's machine, not on a reader's CPU (CONTRIBUTING.md, "Numbers every CPU reproduces"). ``--no-verify``
skips that second pass.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from testsettings import CHAPTERS, CPU_PATH_VARIABLE, NBVAL, ONE_THREAD, REPO, cpu_paths  # tools/testsettings.py


def execute(path: Path, timeout_s: int) -> float:
    """Run ``path`` top to bottom in a fresh kernel and write it back with its outputs; returns the seconds."""
    import nbformat  # noqa: PLC0415 - imported in the worker process
    from nbclient import NotebookClient  # noqa: PLC0415

    start = time.monotonic()
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in nb.cells:  # no run timestamps: a re-run that computes the same outputs changes nothing else
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in book/")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="notebooks at once (default: cores)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one cell may take")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip strict nbval under torch's other CPU code paths after executing")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((REPO / CHAPTERS).glob("*.ipynb"))
    wrong = [str(p) for p in paths if p.suffix != ".ipynb" or not p.is_file()]
    if wrong:
        parser.error(f"expected notebook files (book/NN_name.ipynb), got {', '.join(wrong)}")
    os.environ.update(ONE_THREAD)  # the kernels inherit it
    os.environ.pop(CPU_PATH_VARIABLE, None)  # executed on torch's own (widest) code path, as strict nbval runs
    failed = 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = {pool.submit(execute, path.resolve(), args.timeout): path for path in paths}
        for run in as_completed(runs):
            try:
                print(f"executed {runs[run]} in {run.result():.0f} s", flush=True)
            except Exception as error:  # noqa: BLE001 - report every notebook, then fail
                failed += 1
                print(f"FAILED {runs[run]}: {error}", file=sys.stderr, flush=True)
    if failed or args.no_verify:
        return 1 if failed else 0
    return verify([p.resolve() for p in paths], args.jobs)


def verify(paths: list[Path], jobs: int) -> int:
    """Strict nbval on ``paths`` under each CPU code path but the widest (the one they were executed on)."""
    env = os.environ.copy()
    env.pop(CPU_PATH_VARIABLE, None)
    paths_offered = cpu_paths()
    others = paths_offered[:-1]
    if not others:
        print(f"torch offers one CPU code path here ({paths_offered[0]}): nothing else to check", flush=True)
        return 0
    failed = []
    for path in others:
        start = time.monotonic()
        # one worker per notebook (loadfile): a chapter's cells share one kernel
        workers = ["-n", str(min(jobs, len(paths))), "--dist", "loadfile"] if min(jobs, len(paths)) > 1 else []
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, *NBVAL,
                               *map(str, paths)], cwd=REPO, env=dict(env, **{CPU_PATH_VARIABLE: path}), check=False)
        print(f"strict nbval with {CPU_PATH_VARIABLE}={path}: {'passed' if done.returncode == 0 else 'FAILED'} "
              f"in {time.monotonic() - start:.0f} s", flush=True)
        if done.returncode != 0:
            failed.append(path)
    if failed:
        print(f"The stored outputs depend on the CPU: they fail under {CPU_PATH_VARIABLE}={', '.join(failed)} "
              f"(executed under {paths_offered[-1]}). Show those numbers at a precision every code path "
              "reproduces (CONTRIBUTING.md, 'Numbers every CPU reproduces'), then execute again.",
              file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
