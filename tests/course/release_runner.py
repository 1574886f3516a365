"""Run one notebook top to bottom in the students' environment and save it, as Run All + Save would.

Run by tests/course/test_release.py with the students' Python (it needs only nbformat and nbclient, which
JupyterLab brings): ``python release_runner.py NOTEBOOK``. Prints one JSON line: the seconds it took and
every error output, with the index of its cell and the cell's nbgrader grade id (None outside exercises).
Errors do not stop the run (an unanswered exercise raises ``NotImplementedError`` and the cells after it
still run, as in JupyterLab's Run All with errors shown).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

CELL_TIMEOUT_S = 600


def error_outputs(nb) -> list[dict]:
    """``[{cell, grade_id, ename, evalue}]`` for every error output in the notebook."""
    return [{"cell": index, "grade_id": cell.metadata.get("nbgrader", {}).get("grade_id"),
             "ename": output.ename, "evalue": output.evalue[:300]}
            for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for output in cell.get("outputs", []) if output.output_type == "error"]


def run(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nbformat.write(nb, path)
    return {"seconds": round(time.perf_counter() - started, 1), "errors": error_outputs(nb)}


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]))))
