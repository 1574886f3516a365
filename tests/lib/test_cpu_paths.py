"""tools/testsettings.py's CPU code paths: the runs of `make test` and `make execute` that prove stored outputs
independent of the CPU (issue #32) only prove it if torch really computes on the path each run names."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tools import testsettings

pytestmark = pytest.mark.slow  # each check starts a Python that imports torch (seconds)

ASK = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def capability(path: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != testsettings.CPU_PATH_VARIABLE}
    if path:
        env[testsettings.CPU_PATH_VARIABLE] = path
    done = subprocess.run([sys.executable, "-c", ASK], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip().lower()


def test_the_paths_run_from_default_to_torchs_own_choice():
    paths = testsettings.cpu_paths()
    assert paths[0] == "default" and paths[-1] == capability(None), paths
    assert len(set(paths)) == len(paths), paths


def test_torch_computes_on_each_path_it_is_told():
    for path in testsettings.cpu_paths():
        assert capability(path) == path, f"{testsettings.CPU_PATH_VARIABLE}={path} ignored by torch"


def test_the_three_runs_of_the_chapters_take_different_paths_where_there_are_more():
    paths, runs = testsettings.cpu_paths(), testsettings.run_paths()
    taken = {name: run or paths[-1] for name, run in runs.items()}  # "": torch's own choice, the widest
    assert taken["nbval"] == paths[-1] and taken["release"] == "default", taken
    if len(paths) > 1:
        assert taken["release"] != taken["nbval"], taken
    if len(paths) > 2:
        assert len(set(taken.values())) == 3, taken
