"""attnlib.exercises: the pass message, partial credit and stated-rule checks the chapters' test cells use."""

import numpy as np
import pytest
import torch
from numpy import cumsum as running_total

import attnlib.numpy_ops as helpers
from attnlib import numpy_ops
from attnlib.alternatives import additive_scores as addsc
from attnlib.exercises import Credit, calls, forbid, passed, violations


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


def _aliased_call(q, k, w_q, w_k, v):
    return addsc(q, k, w_q, w_k, v)


def _aliased_name(x):
    return running_total(x)


def _module_alias(x):
    return helpers.split_heads(x, 2)


def _attribute_access(x):
    return numpy_ops.split_heads(x, 2)


def _import_inside(x):
    from attnlib.numpy_ops import split_heads as cut  # noqa: PLC0415 - what the rule check must see

    return cut(x, 2)


def _through_a_variable(x):
    cut = numpy_ops.split_heads
    return cut(x, 2)


def _method_of_a_computed_value(q):
    (q * 2).sum().backward()
    return q.grad


def split_heads(x, num_heads):
    """A student's own helper that happens to share the library's name."""
    return x.reshape(*x.shape[:-1], num_heads, -1).swapaxes(-2, -3)


def _own_helper(x):
    return split_heads(x, 2)


def _own_nested_helper(x):
    def merge_heads(t):
        return t.swapaxes(-2, -3).reshape(*t.shape[:-3], t.shape[-2], -1)

    return merge_heads(x)


def _hides_torch(x):
    return torch.as_tensor(x)


def _helper_that_calls_torch(x):
    return _hides_torch(x)


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


@pytest.mark.parametrize("func, names, where", [
    (_aliased_call, ("additive_scores",), "line 2: addsc"),
    (_aliased_name, ("cumsum",), "line 2: running_total"),
    (_module_alias, ("numpy_ops",), "line 2: helpers.split_heads"),
    (_attribute_access, ("split_heads",), "line 2: numpy_ops.split_heads"),
    (_import_inside, ("split_heads",), "line 2: from attnlib.numpy_ops import split_heads as cut"),
    (_through_a_variable, ("attnlib",), "line 2: numpy_ops.split_heads"),
    (_method_of_a_computed_value, ("backward",), "line 2: (q * 2).sum().backward"),
    (_helper_that_calls_torch, ("torch",), "_hides_torch (called by it), line 2: torch.as_tensor"),
], ids=["alias", "from-import-as", "import-as", "attribute", "import-inside", "variable", "method", "helper"])
def test_forbid_follows_names_to_the_functions_they_mean(func, names, where):
    assert violations(func, names=names) == [where]


def test_forbid_leaves_a_students_own_helper_alone():
    x = np.arange(24.0).reshape(1, 3, 8)
    assert violations(_own_helper, names=("split_heads",)) == []
    assert violations(_own_nested_helper, names=("merge_heads",)) == []
    np.testing.assert_array_equal(split_heads(x, 2), numpy_ops.split_heads(x, 2))  # the helper is a real one


def test_forbid_rejects_unknown_operator_and_builtins():
    with pytest.raises(ValueError, match="expected operators among"):
        violations(_with_matmul, operators=("%%",))
    with pytest.raises(TypeError, match="expected a function defined"):
        violations(len)


def _attend_per_row(value):
    """Attention once per row, under an alias: as many calls as rows."""
    attend = helpers.scaled_dot_product_attention
    zeros = np.zeros((value.shape[0], 1))
    return np.stack([attend(zeros[i:i + 1], zeros[:i + 1], value[:i + 1])[0][0] for i in range(value.shape[0])])


def test_calls_counts_a_checked_step_however_it_is_named():
    value = np.arange(8.0).reshape(4, 2)
    with calls(numpy_ops.scaled_dot_product_attention) as made:
        per_row = _attend_per_row(value)
    assert made.count == 4  # one per row, each counted once although @checked wraps the step
    zeros = np.zeros((4, 1))
    with calls(numpy_ops.scaled_dot_product_attention) as once:
        whole, _ = numpy_ops.scaled_dot_product_attention(zeros, zeros, value, is_causal=True)
    assert once.count == 1
    np.testing.assert_allclose(per_row, whole)  # the same running mean, computed both ways
    with calls(numpy_ops.scaled_dot_product_attention) as none:
        np.cumsum(value, axis=0)
    assert none.count == 0


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
