"""The student edition's notebooks: ``course/release/<assignment>.ipynb``, committed to the repository.

The published website is the student edition (attnsite/nbgrader_site.py): its ``.ipynb`` download is
this folder's notebook, and its Colab and Binder buttons open this folder's notebook from the
repository, so they must be in it. ``python -m course publish`` (``make student``) regenerates them
from the chapters with nbgrader; ``tests/course/test_course.py`` fails when a committed one is out of date.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from attncourse.coursedir import Course
from attncourse.exercise_cells import RELEASE_DIR
from attncourse.release import release
from attncourse.result import Result


def publish(book: Path, course: Course, target: Path = RELEASE_DIR) -> Result:
    """Copy every released notebook of the course to ``target`` (``written``); remove ones of gone chapters."""
    released = release(book, course).written
    target.mkdir(parents=True, exist_ok=True)
    names = {path.name for path in released}
    for stale in target.glob("*.ipynb"):
        if stale.name not in names:
            stale.unlink()
    copies = []
    for path in released:
        copies.append(target / path.name)
        shutil.copyfile(path, copies[-1])
    return Result(written=copies)
