"""tests/course/drift.py: the one tolerance between numbers computed on two machines (one unit of the last digit)."""

from __future__ import annotations

import pytest

from tests.course import drift


@pytest.mark.parametrize(("ours", "theirs"), [("the score is 3.94", "the score is 3.93"), ("0.3 of it", "0.29 of it"),
                                              ("1,024 keys", "1,025 keys"), ("x = -3.6", "x = −3.5"),
                                              ("12.5% and 7", "12.5% and 7")])
def test_a_boundary_flip_of_the_last_digit_is_allowed(ours, theirs):
    assert drift.difference(ours, theirs) is None


@pytest.mark.parametrize(("ours", "theirs"), [("75 steps", "72 steps"), ("0.30", "0.32"), ("the cat", "the hat"),
                                              ("3.9 and 2", "3.9"), ("-1.2", "1.2")])
def test_anything_more_is_a_difference(ours, theirs):
    assert drift.difference(ours, theirs) is not None
