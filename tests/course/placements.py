"""Where an instructor's things may live: folders under ``/tmp``, a home folder and ``/srv``, with a space in their
names, and a copy of this repository whose ``.venv`` is a symlink to this checkout's venv (as a second checkout
sharing one venv has). The sandbox (attncourse/sandbox.py) must grade from any of them (issue #47)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLACES = ("/tmp", "/home", "/srv")


def parent_in(place: str) -> Path:
    """The folder under ``place`` a test writes in: ``/tmp`` itself, this account's home when it is under ``/home``
    (else ``/home`` itself, as root), ``/srv``; a skip where this account may not write there (``/srv`` for an
    account that is not root: root's run, as in CI, places things there)."""
    home = Path.home()
    folder = home if place == "/home" and home.is_relative_to("/home") else Path(place)
    if not os.access(folder, os.W_OK):
        pytest.skip(f"{folder} is not writable by this account (uid {os.getuid()}); a run as root places it there")
    return folder


@contextmanager
def placed_folder(place: str) -> Iterator[Path]:
    """A fresh folder with spaces in its name under ``place``, removed afterwards, readable by everyone (a test that
    drops root's DAC override still reads it)."""
    folder = Path(tempfile.mkdtemp(prefix="attncourse test ", dir=parent_in(place)))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


NOT_COPIED = {".git", ".venv", "node_modules", "_build", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def repository_files() -> list[str]:
    """What a clone of this checkout holds, uncommitted work included: the files git tracks or would (in a copy
    without git, every file but the ignored folders')."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                          capture_output=True, check=False)
    if done.returncode != 0:
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and not NOT_COPIED & set(p.relative_to(ROOT).parts)]
    return [name for name in done.stdout.decode().split("\0") if name and (ROOT / name).is_file()]


def copy_of_repository(target: Path) -> Path:
    """This checkout's files copied to ``target``, whose ``.venv`` is a symlink to the venv running this test; the
    copy's Python (``target/.venv/bin/python``) then imports the copy's attnlib and kit, not this checkout's."""
    for name in repository_files():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)
    (target / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return target


def python_of(checkout: Path) -> Path:
    """The Python of a checkout, as its Makefile runs it (the path through the ``.venv`` symlink, unresolved)."""
    return checkout / ".venv" / "bin" / "python"
