"""The chapters still run, and their checks still pass, where the book must compute in float32.

Apple's MPS has no float64, so on a Mac ``attnlib.exact_dtype()`` gives float32 and every chapter's
comparisons with NumPy must hold at float32's precision. No MPS is here, so this runs each chapter
that uses ``exact_dtype`` on the CPU with ``exact_dtype`` answering float32, through nbclient as the
book build does. Its stored outputs are not compared (printed differences are allowed to grow from
~1e-17 to ~1e-7); only that every cell runs and every assertion in it holds. Where the CPU offers a third of
torch's code paths (avx2 on an AVX-512 machine), the kernels compute on it (tools/testsettings.py's ``run_paths``).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools import testsettings

BOOK = Path(__file__).resolve().parents[2] / "book"
CHAPTERS = sorted(p for p in BOOK.glob("[0-9][0-9]_*.ipynb") if "exact_dtype" in p.read_text(encoding="utf-8"))

AS_ON_MPS = """\
import attnlib, attnlib.device, torch
def _float32(device=None):
    return torch.float32
attnlib.exact_dtype = attnlib.device.exact_dtype = _float32
"""


def test_the_chapters_that_compute_on_the_device_use_exact_dtype():
    assert len(CHAPTERS) >= 6, [p.name for p in CHAPTERS]


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_runs_in_float32(path, monkeypatch):
    from nbclient import NotebookClient  # noqa: PLC0415

    # where the machine has a third CPU code path (avx2 below avx512), the kernel computes on it (strict nbval takes
    # the widest, the release run the narrowest: tools/testsettings.py), so the chapter's assertions are proven there
    if path_here := testsettings.run_paths()["float32"]:
        monkeypatch.setenv(testsettings.CPU_PATH_VARIABLE, path_here)

    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(AS_ON_MPS))
    nb.cells.append(nbformat.v4.new_code_cell("print(dtype)"))  # what the chapter computed in
    # raises CellExecutionError, with the cell and its traceback, if any cell fails
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(BOOK)}}).execute()
    assert nb.cells[-1].outputs[0]["text"].strip() == "torch.float32"
