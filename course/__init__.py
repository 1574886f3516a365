"""The book as an nbgrader course: student releases, autograding, grade tables.

Kept out of ``attnlib`` on purpose: the library computes attention, this package runs a class.
Each chapter ``book/NN_name.ipynb`` is one nbgrader assignment named ``NN_name``. Commands
(run through the project's venv; the Makefile targets call them)::

    python -m course student                 # make student
    python -m course autograde <submissions> # make autograde SUBMISSIONS=<folder>
    python -m course check                   # do the chapters follow CONTRIBUTING.md's exercise format?

The nbgrader course directory is ``_build/course/`` (``source/``, ``release/``, ``submitted/``,
``autograded/``, ``nbgrader_config.py``, ``gradebook.db``, ``grades.csv``).
"""
