"""What goes back out of the course: feedback for the students, the grade sheet for the LMS (attncourse/grades.py)."""

from __future__ import annotations

from attncourse import grades
from attncourse.autograde import nbgrader_reason
from attncourse.coursedir import Course
from attncourse.result import Result


def feedback(course: Course, force: bool = False) -> Result:
    """nbgrader ``generate_feedback`` for every autograded submission whose answers are all graded (every one
    with ``force``): ``written`` the HTML files, ``failed``, and ``held`` the submissions that wait for a grader."""
    result = Result()
    waiting = set() if force else _awaiting_grader(course)
    for student, assignment in course.graded_pairs("autograded"):
        if (student, assignment) in waiting:
            result.held.append(f"{student}/{assignment}")
            continue
        outcome = course.api.generate_feedback(assignment, student, force=True)
        if not outcome["success"]:
            result.failed.append(f"{student}/{assignment}: nbgrader generate_feedback failed: "
                                 f"{nbgrader_reason(outcome)}")
        else:
            result.written += sorted(course.folder("feedback", assignment, student).glob("*.html"))
    return result


def _awaiting_grader(course: Course) -> set[tuple[str, str]]:
    """``(student, assignment)`` of the submissions with an answer graded by hand that has no grade yet."""
    with course.gradebook() as gb:
        return {(sub.student_id, assignment.name) for assignment in gb.assignments for sub in assignment.submissions
                if grades.awaits_grader(sub)}


def grade_sheet(course: Course) -> Result:
    """``grades.csv`` and ``exercises.csv`` written (``written``); ``log`` the sheet as a text table."""
    sheet, per_exercise, table = grades.export(course)
    return Result(written=[sheet, per_exercise], log=table)
