"""The site tier's session hook: the screenshots' contact sheet (``_build/screenshots/index.html``).

``tests/site/test_accessibility.py`` keeps a JPEG of every page state it checks; the page listing them all is
written once when a test process ends, not after every shot. Under pytest-xdist every worker writes it as it
finishes (under a lock, replaced in one step), so the last worker to finish lists every worker's shots.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


def pytest_sessionfinish(session):
    accessibility = sys.modules.get("tests.site.test_accessibility")  # imported only where its tests were collected
    if accessibility is not None and accessibility.SHOTS_TAKEN:
        accessibility.write_contact_sheet()


SITE_TIER = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items):
    """Every test of this tier is marked ``built``: it reads the built site, so ``make test`` runs it once the build is
    done (tools/testrun.py), with the course tests that read what the build made."""
    for item in items:
        if item.path.is_relative_to(SITE_TIER):
            item.add_marker(pytest.mark.built)
