"""The course kit: the book as an nbgrader course, with student releases, sandboxed autograding, feedback and a grade
sheet for a term.

Kept out of ``attnlib`` on purpose: the library computes attention (it is all students install), this package runs
a class. Instructors and the book's developers install it from the repository, with the website's build
(course/pyproject.toml: ``pip install -e ./course``, which ``make setup`` runs). Each chapter ``book/NN_name.ipynb``
is one nbgrader assignment named ``NN_name`` (``attncourse.exercise_cells``: the format the site shares). Commands
(run through the project's venv; the Makefile targets call them)::

    python -m attncourse student                   # make student: bring source/ and release/ up to date
    python -m attncourse publish                   # (make student) the student notebooks into course/release/
    python -m attncourse roster <csv>              # make roster FILE=<csv>: the class list (nbgrader's db import)
    python -m attncourse due <a> <when>            # make due ASSIGNMENT=<a> DUE=<when>: late work is flagged
    python -m attncourse import-zip <zip> <a>      # make import-zip: an LMS download into submitted/ (zip_collect)
    python -m attncourse autograde [<submissions>] # make autograde SUBMISSIONS=<folder> [JOBS=N] [DASK=<address>]
    python -m attncourse regrade <a>               # make regrade ASSIGNMENT=<a>: every submission of it again
    python -m attncourse feedback [--force]        # make feedback [FORCE=1]: held back while answers await a grader
    python -m attncourse grades                    # make grades: grades.csv and exercises.csv
    python -m attncourse bench                     # make grade-bench: notebooks/min with 1 and N workers, and Dask
    python -m attncourse check                     # do the chapters follow CONTRIBUTING.md's exercise format?

The nbgrader course directory is ``course-work/`` (``--course DIR`` or ``$COURSE``, anywhere): ``source/``,
``release/``, ``submitted/``, ``autograded/``, ``feedback/``, ``gradebook.db``, ``nbgrader_config.py``,
``graded.json``, ``stopped.json`` (what a sandbox limit stopped), ``grades.csv``, ``exercises.csv``, ``logs/``
(nbgrader's logs of failed runs), ``downloaded/`` (zip imports), ``.course.lock``. It persists: no command deletes
it. Its one owner is ``attncourse.coursedir.Course`` (every path, the config, nbgrader's API, the gradebook, the
ledgers, the lock); the commands, each returning an ``attncourse.result.Result``: attncourse/release.py
(``student``), attncourse/collect.py (``roster``, ``import-zip``, ``due``, submissions into ``submitted/``),
attncourse/autograde.py (``autograde``, ``regrade``), attncourse/report.py (``feedback``, ``grades``);
attncourse/parallel.py says how grading runs (here, on worker processes, on Dask); attncourse/sandbox.py,
attncourse/boundary.py (with attncourse/kernel_helper.py, run in the kernel) and attncourse/verdict.py how student
code runs sandboxed and is judged outside its process.
"""
