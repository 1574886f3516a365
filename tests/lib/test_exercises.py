"""attnlib.exercises: the pass message, partial credit and stated-rule checks the chapters' test cells use."""

import importlib
import sys

import numpy as np
import pytest
import torch
from numpy import cumsum as running_total

import attnlib.alternatives  # noqa: F401 - in sys.modules, where one answer fetches the reference
import attnlib.numpy_ops as helpers
from attnlib import numpy_ops
from attnlib.alternatives import additive_scores as addsc
from attnlib.exercises import Call, Credit, Run, forbid, passed, violations, watch


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


def _running_mean(value):
    zeros = np.zeros((value.shape[0], 1))
    return numpy_ops.scaled_dot_product_attention(zeros, zeros, value, is_causal=True)[0]


def _throw_away_call(value):
    """One call to attention whose output it ignores, then the running mean by hand."""
    numpy_ops.scaled_dot_product_attention(value, value, value)
    length = value.shape[0]
    return np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None] @ value


def _through_sys_modules(q, k, w_q, w_k, w):
    """The reference fetched from sys.modules and torch from importlib: no name the source check can see."""
    reference = sys.modules["attn" + "lib.altern" + "atives"].additive_scores
    library = importlib.import_module("tor" + "ch")
    return reference(*(library.from_numpy(a) for a in (q, k, w_q, w_k, w))).numpy()


def _numpy_bahdanau(q, k, w_q, w_k, w):
    return np.tanh((q @ w_q)[:, None, :] + (k @ w_k)[None, :, :]) @ w


def _helper_cumsum(x):
    return np.cumsum(x, axis=0)


def _uses_a_helper(x):
    return _helper_cumsum(x) / 2


def _folds_with_a_ufunc(x):
    return np.logaddexp.reduce(x, axis=-1)


def _switches_recording_off(x):
    sys.setprofile(None)
    return torch.as_tensor(x).numpy()


def _bahdanau_args():
    rng = np.random.default_rng(0)
    return (rng.normal(size=(2, 3)), rng.normal(size=(4, 5)), rng.normal(size=(3, 6)), rng.normal(size=(5, 6)),
            rng.normal(size=6))


def test_watch_sees_a_call_however_the_code_reached_it():
    run = watch(_through_sys_modules, *_bahdanau_args())
    called = [str(call) for call in run.calls]
    assert "attnlib.alternatives.additive_scores" in called and "torch.from_numpy" in called
    with pytest.raises(AssertionError, match="NumPy only; _through_sys_modules called torch.from_numpy, "
                                             "attnlib.alternatives.additive_scores"):
        run.forbid(rule="NumPy only", modules=("torch", "scipy", "attnlib"))
    honest = watch(_numpy_bahdanau, *_bahdanau_args())
    honest.forbid(rule="NumPy only", modules=("torch", "scipy", "attnlib"), names=("additive_scores",))
    np.testing.assert_allclose(honest.value, run.value)  # the same scores: only the way differs


def test_watch_counts_a_checked_step_and_keeps_its_results():
    value = np.arange(8.0).reshape(4, 2)
    per_row = watch(_attend_per_row, value)
    assert per_row.count(numpy_ops.scaled_dot_product_attention) == 4  # once per row, the @checked wrapper seen through
    once = watch(_running_mean, value)
    assert once.count(numpy_ops.scaled_dot_product_attention) == 1
    np.testing.assert_allclose(once.value, once.results(numpy_ops.scaled_dot_product_attention)[0][0])
    np.testing.assert_allclose(per_row.value, once.value)  # the same running mean, computed both ways
    cheat = watch(_throw_away_call, value)
    assert cheat.count(numpy_ops.scaled_dot_product_attention) == 1
    np.testing.assert_allclose(cheat.value, once.value)  # right numbers ...
    assert not np.allclose(cheat.value, cheat.results(numpy_ops.scaled_dot_product_attention)[0][0])  # ... not from it
    assert watch(np.cumsum, value).count(numpy_ops.scaled_dot_product_attention) == 0


def test_watch_records_the_students_helpers_calls_and_reads_the_source():
    run = watch(_uses_a_helper, np.ones((3, 2)))
    assert [str(call) for call in run.calls if "cumsum" in str(call)] == ["numpy._core.fromnumeric.cumsum"]
    with pytest.raises(AssertionError, match="no running total; _uses_a_helper called numpy._core.fromnumeric.cumsum"):
        run.forbid(rule="no running total", names=("cumsum",))
    ufunc = watch(_folds_with_a_ufunc, np.zeros((2, 3)))
    with pytest.raises(AssertionError, match="called numpy.logaddexp.reduce"):
        ufunc.forbid(rule="write the shift yourself", names=("logaddexp",))
    with pytest.raises(AssertionError, match="_with_matmul breaks it at line 2: the operator @"):
        watch(_with_matmul, np.eye(2), np.eye(2)).forbid(rule="without @", operators=("@",))


def test_watch_refuses_code_that_switches_the_recording_off():
    run = watch(_switches_recording_off, np.ones(3))
    assert sys.getprofile() is None
    with pytest.raises(AssertionError, match="switched off the recording of its calls"):
        run.forbid(rule="NumPy only", modules=("torch",))


def test_a_run_crosses_the_grading_boundary_as_data():
    run = watch(_running_mean, np.arange(6.0).reshape(3, 2))
    run.calls.append(Call("attnlib.models:load", object()))  # a result that is not data
    data = run.data()
    assert data["calls"][-1] == ["attnlib.models:load", None]
    back = Run.from_data(_running_mean, data)
    assert back.count(numpy_ops.scaled_dot_product_attention) == 1 and back.name == "_running_mean"
    np.testing.assert_allclose(back.results(numpy_ops.scaled_dot_product_attention)[0][1],
                               run.results(numpy_ops.scaled_dot_product_attention)[0][1])


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
