"""Not a Python package to import: this file only makes pytest import book/conftest.py as ``book.conftest``,
so that it does not shadow tests/conftest.py (the tests import helpers with ``from conftest import ...``)."""
