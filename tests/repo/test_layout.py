"""The README's layout table and the tree agree: every path git tracks at the top level is in the table, and every
path the table names exists (a folder as a folder)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOT_LISTED = {".gitignore"}  # git's own file: nothing to say about it


def layout_paths() -> list[str]:
    """The backticked paths in the first column of the README's Layout table (``.ci/run``, ``attnsite/``...)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [path for row in rows for path in re.findall(r"`([^`]+)`", row.split(" | ")[0])]


def tracked_top_level() -> set[str]:
    """Every top-level entry git tracks, folders with a trailing slash."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an sdist or a copy): nothing tracked to compare")
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return {name.split("/")[0] + ("/" if "/" in name else "") for name in files}


def test_the_table_is_found():
    assert len(layout_paths()) >= 10, layout_paths()


def test_every_tracked_top_level_path_is_in_the_layout():
    listed = {path.split("/")[0] + ("/" if "/" in path else "") for path in layout_paths()}
    missing = sorted(tracked_top_level() - listed - NOT_LISTED)
    assert not missing, f"README's Layout table does not name {missing}"


def test_every_path_in_the_layout_exists():
    def exists(path: str) -> bool:
        return (REPO / path).is_dir() if path.endswith("/") else (REPO / path).is_file()

    wrong = [path for path in layout_paths() if not exists(path)]
    assert not wrong, f"README's Layout table names paths that are not in the tree (or not of that kind): {wrong}"
