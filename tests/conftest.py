"""What every tier needs: the groups pytest-xdist hands whole to one worker (tools/pytest_scheduler.py).

Each tier has its own helpers and fixtures (tests/lib/tensors.py and tests/lib/conftest.py, tests/course/...);
tests/browser_utils.py serves the tiers that drive Chromium (lib's views, site, course).
"""

from __future__ import annotations

from tools.pytest_scheduler import (  # noqa: F401 - hooks pytest finds in this module
    pytest_collection_modifyitems,
    pytest_xdist_make_scheduler,
)
