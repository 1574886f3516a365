"""Fixtures of the course tests."""

from tests.course.students import students  # noqa: F401 - the students' environment (JupyterLab, releases)
