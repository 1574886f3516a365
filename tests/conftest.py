"""What every tier needs: the hooks that spread the tests over the cores and time them (tools/pytest_scheduler.py).

Each tier has its own helpers and fixtures (tests/lib/tensors.py and tests/lib/conftest.py, tests/course/...);
tests/browser_utils.py serves the three tiers that drive Chromium (lib's views, site, course).
"""

from __future__ import annotations

from tools.pytest_scheduler import (  # noqa: F401 - hooks pytest finds in this module
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_runtest_logreport,
    pytest_terminal_summary,
    pytest_xdist_make_scheduler,
)
