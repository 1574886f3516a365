"""The root conftest.py: strict nbval compares every output the site shows, since the site is built from them.

Runs pytest's strict nbval, as ``make test`` does, on a small notebook beside a copy of the root ``conftest.py``:
a shown cell tagged ``nbval-ignore-output`` whose stored output is stale fails, as do a shown cell tagged
``nbval-skip`` and a shown cell stored unexecuted; the same cells pass when the site hides their output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def code(source: str, tags=(), count=1, stdout=None):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)}, execution_count=count)
    if stdout is not None:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stdout)]
    return cell


CELLS = {  # name: (cell, its outcome under the policy)
    "current": (code("print(6 * 7)", stdout="42\n"), "PASSED"),
    "stale_ignored": (code("print(6 * 7)", ["nbval-ignore-output"], stdout="41\n"), "FAILED"),
    "stale_ignored_hidden": (code("print(6 * 7)", ["nbval-ignore-output", "remove-output"], stdout="41\n"), "PASSED"),
    "skipped": (code("print(6 * 7)", ["nbval-skip"], stdout="41\n"), "FAILED"),
    "skipped_removed": (code("print(6 * 7)", ["nbval-skip", "remove-cell"], stdout="41\n"), "SKIPPED"),
    "unexecuted": (code("print(6 * 7)", count=None), "FAILED"),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("policy")
    shutil.copy(ROOT / "conftest.py", folder / "conftest.py")
    nb = nbformat.v4.new_notebook(cells=[cell for cell, _ in CELLS.values()])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "policy.ipynb")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--nbval", "--nbval-current-env",
               "--rootdir", str(folder), str(folder / "policy.ipynb")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the conftest imports the course package (recorded answers)
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300, check=False, env=env)
    by_cell = dict(re.findall(r"::Cell (\d+) (PASSED|FAILED|SKIPPED|ERROR)", done.stdout))
    assert by_cell, f"no per-cell results from pytest:\n{done.stdout}\n{done.stderr}"
    return {name: by_cell.get(str(i), "missing") for i, name in enumerate(CELLS)}


@pytest.mark.parametrize("name", CELLS)
def test_cell_outcome(outcomes, name):
    assert outcomes[name] == CELLS[name][1], outcomes


def test_site_is_built_from_the_stored_outputs_nbval_checks():
    """The policy exists because the build executes nothing: keep the two in step."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert config["execute"]["execute_notebooks"] == "off", "the policy above assumes the site shows stored outputs"
    assert sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")), "no chapters found"
