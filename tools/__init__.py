"""The repository's scripts and test plumbing (not installed with attnlib): a package, so that ``tools.testsettings``
and ``tools.pytest_scheduler`` import the same from pytest, the root conftest.py and the scripts run from the root."""
