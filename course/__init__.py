"""The book as an nbgrader course: student releases, autograding, feedback and a grade sheet for a term.

Kept out of ``attnlib`` on purpose: the library computes attention, this package runs a class.
Each chapter ``book/NN_name.ipynb`` is one nbgrader assignment named ``NN_name``. Commands
(run through the project's venv; the Makefile targets call them)::

    python -m course student                   # make student: bring source/ and release/ up to date
    python -m course publish                   # (make student) the student notebooks into course/release/
    python -m course autograde [<submissions>] # make autograde SUBMISSIONS=<folder>: new and changed work only
    python -m course feedback                  # make feedback
    python -m course grades                    # make grades: grades.csv and exercises.csv
    python -m course check                     # do the chapters follow CONTRIBUTING.md's exercise format?

The nbgrader course directory is ``course-work/`` (``--course DIR`` or ``$COURSE``): ``source/``,
``release/``, ``submitted/``, ``autograded/``, ``feedback/``, ``gradebook.db``, ``nbgrader_config.py``,
``graded.json``, ``grades.csv``, ``exercises.csv``. It persists: no command deletes it
(course/nbgrader_course.py says what each one updates).
"""
