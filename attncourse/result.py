"""``Result``: what a command did, the one type every command of the course returns (attncourse/__main__.py prints it).

Each field is a list of what one kind of outcome touched (empty when none): a command fills the ones it has.
``failed`` non-empty means the command failed (``python -m attncourse`` exits 1), though it did the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Result:
    """One command's outcome: files written, submissions graded or left alone, notes, and what failed."""

    written: list[Path] = field(default_factory=list)  # files written or brought up to date (releases, feedback)
    graded: list[tuple[str, str]] = field(default_factory=list)  # (student, assignment) autograded now
    unchanged: list[tuple[str, str]] = field(default_factory=list)  # already graded from the same bytes: kept
    retested: list[str] = field(default_factory=list)  # regraded, unchanged, because the assignment's tests changed
    renamed: list[str] = field(default_factory=list)  # "<student>/<a>: graded x.ipynb as <a>.ipynb"
    empty: list[str] = field(default_factory=list)  # "<student>/<a>": a folder with nothing in it
    stopped: list[str] = field(default_factory=list)  # "<student> 3.1: stopped after 30 s": a limit stopped it
    warnings: list[str] = field(default_factory=list)  # done, but a person should look
    held: list[str] = field(default_factory=list)  # "<student>/<a>": left for later (feedback awaits a grader)
    failed: list[str] = field(default_factory=list)  # "<what>: why"
    log: str = ""  # what nbgrader or the command printed, when that is its answer (roster, zip import, due date)

    @property
    def ok(self) -> bool:
        return not self.failed
