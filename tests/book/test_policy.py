"""The chapters are computed by the build and checked by nbval, never stored with outputs (issue #42):

- every chapter in ``book/`` is committed without outputs, execution counts or widget state (``make strip``);
- the site's build executes them, raising on any error, through a cache that attnlib's changes empty;
- the root ``conftest.py``'s policy, run by pytest on a small notebook beside a copy of it: every cell runs (a cell
  tagged ``nbval-skip`` fails, a failed assertion fails), ``--kernel-env`` reaches the kernel and not the test
  process, and an autograded chapter's recorded answers are graded after its last cell.
"""

from __future__ import annotations

import json
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
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_the_chapter_is_stored_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    stored = [cell.get("id") for cell in nb["cells"] if cell["cell_type"] == "code"
              and (cell.get("outputs") or cell.get("execution_count") is not None or "execution" in cell["metadata"])]
    assert stored == [] and "widgets" not in nb["metadata"], (
        f"{path.name}: expected no outputs (the build computes them), got some in cells {stored}"
        f"{' and widget state' if 'widgets' in nb['metadata'] else ''}: run `make strip`")


def test_the_build_executes_the_chapters_and_stops_on_an_error():
    execute = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["execute"]
    assert execute["execute_notebooks"] == "cache" and execute["allow_errors"] is False
    assert execute["raise_on_error"] is True and execute["cache"].startswith("_build/")
    extensions = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["extra_extensions"]
    assert "attnsite.execution" in extensions  # empties the cache when attnlib changes


def code(source: str, tags=()):
    return nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})


CELLS = {  # name: (cell, its outcome under the policy)
    "runs": (code("x = 6 * 7\nassert x == 42"), "PASSED"),
    "kernel_env": (code("import os\nassert os.environ['ATTNLIB_POLICY_PROBE'] == 'kernel'"), "PASSED"),
    "false_claim": (code("assert x == 41, 'the claim does not hold'"), "FAILED"),
    "skipped": (code("print(6 * 7)", ["nbval-skip"]), "FAILED"),
    "raises": (code("raise ValueError('expected')", ["raises-exception"]), "PASSED"),
}
PROCESS_TEST = """import os
def test_the_kernel_env_stays_in_the_kernels():
    assert 'ATTNLIB_POLICY_PROBE' not in os.environ
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("policy")
    shutil.copy(ROOT / "conftest.py", folder / "conftest.py")
    nb = nbformat.v4.new_notebook(cells=[cell for cell, _ in CELLS.values()])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "policy.ipynb")
    (folder / "test_process.py").write_text(PROCESS_TEST)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--nbval-lax", "--nbval-current-env",
               "--kernel-env", "ATTNLIB_POLICY_PROBE=kernel", "--rootdir", str(folder), "policy.ipynb",
               "test_process.py"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the conftest imports tools/ and the recorded-answers plugin
    env.pop("ATTNLIB_POLICY_PROBE", None)
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300, check=False, env=env)
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", CELLS)
def test_cell_outcome(outcomes, name):
    by_cell = dict(re.findall(r"::Cell (\d+) (PASSED|FAILED|SKIPPED|ERROR)", outcomes))
    assert by_cell.get(str(list(CELLS).index(name))) == CELLS[name][1], outcomes[-3000:]


@pytest.mark.slow
def test_kernel_env_leaves_the_test_process_alone(outcomes):
    assert "test_the_kernel_env_stays_in_the_kernels PASSED" in outcomes, outcomes[-3000:]


@pytest.mark.slow
def test_an_autograded_chapter_ends_with_its_recorded_answers():
    chapter = next(p for p in CHAPTERS if p.stem.startswith("03_"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           "--nbval-lax", "--nbval-current-env", str(chapter.relative_to(ROOT))],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    items = [line for line in done.stdout.splitlines() if "::" in line]
    assert items and items[-1].endswith("::recorded answers"), done.stdout[-2000:]
    assert sum(line.endswith("::recorded answers") for line in items) == 1
