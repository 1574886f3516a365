"""``make execute``: run chapters in place and store their outputs, as strict nbval will run them.

The site shows the outputs stored in ``book/*.ipynb`` and ``make test`` compares every one with a fresh run
(strict nbval), so after changing a chapter or attnlib, execute the chapters it touches and commit them:

    make execute                           # every notebook in book/, two at a time (one per core)
    make execute NB="book/03_softmax.ipynb book/04_weighted_sums.ipynb"

Each notebook runs in a fresh kernel from its own folder with the environment nbval gives the kernels
(tools/testsettings.py's ``ONE_THREAD``, as the root conftest.py gives them), so the stored last digits are the ones
nbval computes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from testsettings import CHAPTERS, ONE_THREAD, REPO  # tools/testsettings.py, beside this script


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
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((REPO / CHAPTERS).glob("*.ipynb"))
    wrong = [str(p) for p in paths if p.suffix != ".ipynb" or not p.is_file()]
    if wrong:
        parser.error(f"expected notebook files (book/NN_name.ipynb), got {', '.join(wrong)}")
    os.environ.update(ONE_THREAD)  # the kernels inherit it
    failed = 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = {pool.submit(execute, path.resolve(), args.timeout): path for path in paths}
        for run in as_completed(runs):
            try:
                print(f"executed {runs[run]} in {run.result():.0f} s", flush=True)
            except Exception as error:  # noqa: BLE001 - report every notebook, then fail
                failed += 1
                print(f"FAILED {runs[run]}: {error}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
