"""The students' environment, made by the instructors' JupyterHub recipe (book/instructors.md, "JupyterHub").

The recipe's commands run verbatim but for the folders, in a fresh folder: a clone of this checkout's HEAD
(commit first), a venv from ``requirements.txt`` (kept in ``_build/student-env`` while ``requirements_key`` is
unchanged: its first run pays minutes of pip) and the kernel registered under a prefix. HOME is empty and
the clone has no node_modules: the views find their JavaScript in attnlib itself.

The ``students`` fixture (tests/course/conftest.py) is made once per test process: test_jupyterlab.py runs
JupyterLab from it and test_release.py the released chapters in it. tools/testsettings.py's ``TOGETHER`` keeps
the two files in one worker, so one venv is never built by two processes at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib
import yaml

from tests import browser_utils as bu


def recipe() -> str:
    """The shell block under the instructors' page's JupyterHub heading."""
    text = (bu.REPO / "book" / "instructors.md").read_text(encoding="utf-8")
    section = text.split("### JupyterHub", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S)[1]


STUDENT_ENV = bu.REPO / "_build" / "student-env"  # the recipe's environment, kept while requirements.txt is unchanged
REPOSITORY_URL = yaml.safe_load((bu.REPO / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]


def requirements_key() -> str:
    """What the students' venv depends on: ``requirements.txt``, the ``[project]`` and ``[build-system]`` tables of
    pyproject.toml (attnlib's own dependencies, installed by its ``-e .``) and this Python's version. The rest of
    pyproject.toml (pytest's, ruff's settings) does not make a new venv."""
    pyproject = tomllib.loads((bu.REPO / "pyproject.toml").read_text(encoding="utf-8"))
    parts = {"requirements.txt": (bu.REPO / "requirements.txt").read_text(encoding="utf-8"),
             "project": pyproject.get("project"), "build-system": pyproject.get("build-system"),
             "python": sys.version}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def student_env() -> Path:
    """The folder the recipe's venv goes into: emptied whenever ``requirements_key`` changed.

    The first run pays for the venv (pip installs every student package, from local wheels and pip's cache:
    minutes); later runs execute the same recipe, pip finds everything installed, and only the clone,
    the editable attnlib and the kernel registration cost time.
    """
    key = requirements_key()
    marker = STUDENT_ENV / ".requirements-sha256"
    if not marker.is_file() or marker.read_text() != key:
        shutil.rmtree(STUDENT_ENV, ignore_errors=True)
        STUDENT_ENV.mkdir(parents=True)
        marker.write_text(key)
    return STUDENT_ENV / "env"


@pytest.fixture(scope="session")
def students(tmp_path_factory) -> dict:
    """The recipe's commands run in a fresh folder: {clone, python, prefix, home, env, seconds}."""
    folder = tmp_path_factory.mktemp("jupyterhub")
    env_dir = student_env()
    commands = recipe().replace("/opt/attention-step-by-step", str(folder / "clone"))
    commands = commands.replace("/opt/attention-env", str(env_dir))
    commands = commands.replace(REPOSITORY_URL, str(bu.REPO))
    commands = commands.replace("--prefix /usr/local", f"--prefix {folder / 'jupyter'}")
    home = folder / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
           "npm_config_cache": str(Path.home() / ".npm"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("ATTNLIB_NODE_MODULES", None)
    started = time.perf_counter()
    done = subprocess.run(["bash", "-euxo", "pipefail", "-c", commands], capture_output=True, text=True,
                          timeout=1800, check=False, env=env)
    if done.returncode != 0:
        pytest.fail(f"the JupyterHub recipe failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}", pytrace=False)
    return {"clone": folder / "clone", "python": env_dir / "bin" / "python", "prefix": folder / "jupyter",
            "home": home, "env": env, "seconds": time.perf_counter() - started}
