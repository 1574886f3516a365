"""Fixtures of attnlib's tests (the helpers they build on are in tests/lib/tensors.py)."""

from __future__ import annotations

import pytest

# Imported before any test module: on a machine without a GPU it sets TRITON_INTERPRET before anything imports Triton
# (torch.nn.attention's modules do, and Triton reads the variable when it is imported), so the kernels run in
# Triton's interpreter whatever the order of the test modules.
from attnlib import flash_triton  # noqa: F401
from tests import browser_utils as bu
from tests.lib.tensors import randn

# Records every alert() a page calls (window.__alerts): a view that runs text it was given would call one.
ALERT_HOOK = "window.__alerts = []; window.alert = function (m) { window.__alerts.push(String(m)); };"


@pytest.fixture
def qkv64():
    """query (2, 3, 4, 8), key (2, 3, 6, 8), value (2, 3, 6, 5) in float64: Lq≠Lk, Dv≠Dk."""
    return randn(2, 3, 4, 8, seed=1), randn(2, 3, 6, 8, seed=2), randn(2, 3, 6, 5, seed=3)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (one per test module) in which every page records its alert() calls in window.__alerts."""
    bu.require_chromium()
    with bu.chromium() as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ALERT_HOOK})
        yield driver
