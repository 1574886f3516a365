"""The course: nbgrader releases and grading, the committed student releases, the students' environment from
the instructors' recipe and JupyterLab on it."""
