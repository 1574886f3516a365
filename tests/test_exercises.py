"""attnlib.exercises: the pass message, partial credit and stated-rule checks the chapters' test cells use."""

import numpy as np
import pytest

from attnlib.exercises import Credit, forbid, passed, violations


def _with_matmul(a, b):
    return a @ b


def _with_cumsum(x):
    return np.cumsum(x)


def _with_loops(a, b):
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = sum(a[i, k] * b[k, j] for k in range(a.shape[1]))
    return out


def test_passed_prints_one_message(capsys):
    passed("Exercise 1.2")
    assert capsys.readouterr().out == "Exercise 1.2: tests passed\n"


def test_forbid_finds_operator_and_name():
    assert violations(_with_matmul, operators=("@",)) == ["line 2: the operator @"]
    assert violations(_with_cumsum, names=("cumsum",)) == ["line 2: np.cumsum"]
    with pytest.raises(AssertionError, match="without @.*_with_matmul breaks it at line 2"):
        forbid(_with_matmul, operators=("@",), rule="compute it without @")


def test_forbid_passes_code_that_keeps_the_rule():
    forbid(_with_loops, operators=("@",), names=("matmul", "dot", "einsum"), rule="loops only")
    np.testing.assert_allclose(_with_loops(np.eye(2), np.ones((2, 3))), np.ones((2, 3)))


def test_forbid_rejects_unknown_operator_and_builtins():
    with pytest.raises(ValueError, match="expected operators among"):
        violations(_with_matmul, operators=("%%",))
    with pytest.raises(TypeError, match="expected a function defined"):
        violations(len)


def test_credit_scores_parts(capsys):
    credit = Credit("Exercise 2.4", points=3)
    with credit.part("(a)", 1):
        assert True
    with credit.part("(b)", 2):
        raise ZeroDivisionError("boom")
    assert credit.score() == 1
    out = capsys.readouterr().out
    assert "Exercise 2.4 (b) failed (2 points lost): ZeroDivisionError: boom" in out
    assert "tests passed" not in out


def test_credit_full_marks_and_bad_totals(capsys):
    credit = Credit("Exercise 3.1", points=2)
    with credit.part("(a)", 2):
        pass
    assert credit.score() == 2
    assert capsys.readouterr().out == "Exercise 3.1: tests passed\n"
    wrong = Credit("Exercise 3.2", points=2)
    with wrong.part("(a)", 1):
        pass
    with pytest.raises(ValueError, match="add up to 2 points, got 1"):
        wrong.score()
