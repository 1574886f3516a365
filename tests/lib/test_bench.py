"""attnlib.bench's pure parts on tiny sizes: every path is correct forward and backward, the table has every row
and column, absent paths say why, and the summary states the goals.

No timing is asserted: speed is what the benchmark prints, not what a test checks.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnlib import bench

TINY = bench.Config(lengths=(8, 16), batch=1, heads=2, dims=(4,), devices=("cpu",), min_run_time=0.001, rounds=1)
ON_CPU = [name for name, path in bench.PATHS.items() if not path.cuda]


@pytest.fixture(scope="module")
def rows():
    return bench.run(TINY, progress=False)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("path", ON_CPU)
def test_every_cpu_path_computes_torch_sdpa(path, is_causal):
    query, key, value = bench.make_inputs(2, 3, 12, 8, dtype=torch.float64)
    output = bench.PATHS[path](query, key, value, is_causal)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("path", [name for name in ON_CPU if bench.PATHS[name].cpu_backward])
def test_every_cpu_path_has_torchs_gradients(path):
    inputs = [t.requires_grad_() for t in bench.make_inputs(1, 2, 10, 8, dtype=torch.float64, seed=1)]
    ours = torch.autograd.grad(bench.PATHS[path](*inputs, True).sum(), inputs)
    expected = torch.autograd.grad(F.scaled_dot_product_attention(*inputs, is_causal=True).sum(), inputs)
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)


def test_make_inputs_is_seeded():
    first, second = bench.make_inputs(1, 2, 5, 4, seed=3), bench.make_inputs(1, 2, 5, 4, seed=3)
    assert all(torch.equal(a, b) and a.shape == (1, 2, 5, 4) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[0], first[1])


@pytest.mark.slow  # the bench run of the rows fixture: make check leaves it to make test
def test_run_has_one_row_per_case_and_path(rows):
    cases = [(length, causal, mode) for causal in (False, True) for length in TINY.lengths for mode in bench.MODES]
    assert [(r["L"], r["causal"], r["mode"], r["path"]) for r in rows] == [
        (*case, path) for case in cases for path in bench.PATHS]
    for r in rows:
        if r["absent"]:
            assert math.isnan(r["time_s"]) and r["path"] not in ("attnlib weights", "attnlib flash", bench.BASELINE)
        else:
            assert r["time_s"] > 0 and r["peak_bytes"] > 0 and r["tflops"] > 0
    baseline = [r for r in rows if r["path"] == bench.BASELINE]
    assert baseline and all(r["time_ratio"] == 1.0 and r["peak_ratio"] == 1.0 for r in baseline)


@pytest.mark.slow  # the bench run of the rows fixture: make check leaves it to make test
def test_cuda_paths_and_flex_backward_say_why_they_are_absent_on_a_cpu(rows):
    reasons = {(r["path"], r["mode"]): r["absent"] for r in rows}
    for name in ("attnlib triton", bench.CUDA_BASELINE, "SDPA efficient", "SDPA cuDNN"):
        assert reasons[(name, "fwd")].startswith("CUDA only")
    assert "interpreter" in reasons[("attnlib triton", "fwd")]
    assert reasons[("FlexAttention", "fwd")] is None and "no backward" in reasons[("FlexAttention", "fwd+bwd")]


@pytest.mark.slow  # the bench run of the rows fixture: make check leaves it to make test
def test_table_has_every_row_and_column(rows):
    lines = bench.format_table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(column in lines[0] for column in bench.COLUMNS)
    for line, r in zip(lines[2:], rows, strict=True):
        assert len(line.split()) >= len(bench.COLUMNS) and r["path"] in line and str(r["L"]) in line
        assert ("absent: " in line) == bool(r["absent"])


@pytest.mark.slow  # the bench run of the rows fixture: make check leaves it to make test
def test_summary_names_the_three_headline_ratios(rows):
    text = "\n".join(bench.summary(rows))
    for pair in ("time of attnlib weights / torch softmax", "time of attnlib fast / torch SDPA",
                 "peak of attnlib flash / attnlib weights", "backward peak of attnlib flash / attnlib weights"):
        assert pair in text
    assert "L=16" in text and "L=8 " not in text


def _fake(path, time_s, peak, length, mode, device="cuda", dtype="bfloat16"):
    row = {"device": device, "dtype": dtype, "D": 64, "causal": False, "L": length, "mode": mode, "path": path,
           "batch": 1, "heads": 1, "time_s": time_s, "peak_bytes": peak, "absent": None}
    return row


def test_summary_states_each_goal_met_or_missed():
    rows = [_fake("attnlib triton", 1.0, 1, 8192, "fwd"), _fake(bench.CUDA_BASELINE, 1.1, 1, 8192, "fwd"),
            _fake("SDPA cuDNN", 0.5, 1, 8192, "fwd"), _fake("attnlib triton", 3.0, 1, 8192, "fwd+bwd"),
            _fake(bench.CUDA_BASELINE, 2.0, 1, 8192, "fwd+bwd"), _fake("attnlib triton", 1.0, 1, 1024, "fwd"),
            _fake("attnlib weights", 1.0, 100, 4096, "fwd+bwd", "cpu", "float32"),
            _fake("attnlib flash", 9.0, 20, 4096, "fwd+bwd", "cpu", "float32")]
    lines = bench.summary(bench._with_ratios(rows))
    assert any("attnlib triton at 1.10x the speed of SDPA flash (goal >= 1.0: met)" in line for line in lines)
    assert any("at 0.50x the speed of SDPA cuDNN (goal >= 0.6: MISSED)" in line for line in lines)
    assert any("fwd+bwd: attnlib triton at 0.67x the speed of SDPA flash (goal >= 0.8: MISSED)" in line
               for line in lines)
    assert any("backward peak of attnlib flash / attnlib weights = 0.200 (goal <= 0.25: met)" in line
               for line in lines)
    assert not any("L=1024" in line for line in lines)  # the goals are at L = 8192


def test_quadratic_paths_that_would_not_fit_are_absent_with_their_size():
    case = bench.Case("cpu", "float32", 1, 1, 2**22, 64, False, "fwd")  # an (L, L) matrix of 64 TiB
    assert "would take about" in bench.absent("attnlib weights", case, TINY)
    assert bench.absent(bench.BASELINE, case, TINY) is None


def test_cpu_peak_counts_live_tensors():
    n = 100_000

    def two_at_once():
        a = torch.ones(n)
        b = a.neg()  # a and b live together: the peak holds both
        del a
        return b.exp()  # b and the result live together (no Python scalars: they would be tensors too)

    nbytes = torch.ones(n).nbytes
    assert bench.cpu_peak_bytes(lambda: torch.ones(n)) == nbytes
    assert bench.cpu_peak_bytes(two_at_once) == 2 * nbytes


def test_flops_follow_the_convention():
    assert bench.flops(2, 3, 5, 7, 8, False, "fwd") == 4 * 2 * 3 * 5 * 7 * 8
    assert bench.flops(2, 3, 5, 7, 8, True, "fwd+bwd") == 3.5 * 0.5 * 4 * 2 * 3 * 5 * 7 * 8


def test_command_line_options():
    config = bench.config_from_args(["--quick"])
    assert config.quick and config.cuda_dtypes == ("bfloat16",) and config.min_run_time == 0.05
    assert [c.length for c in bench._cases(bench.Config(devices=("cpu",), quick=True, modes=("fwd",),
                                                        causal=(False,)))] == [128, 256, 512]
    config = bench.config_from_args(["--lengths", "8", "16", "--heads", "2", "--causal", "--devices", "cpu",
                                     "--dims", "64", "128", "--modes", "fwd", "--paths", "torch SDPA"])
    assert config.lengths == (8, 16) and config.heads == 2 and config.causal == (True,)
    assert config.devices == ("cpu",) and config.dims == (64, 128) and config.modes == ("fwd",)
    assert config.paths == ("torch SDPA",)
    assert bench.config_from_args(["--masks", "full"]).causal == (False,)
    assert max(bench.DEFAULTS["cuda"][0]) >= 16384 and 4096 in bench.DEFAULTS["cpu"][0]
    assert bench.DEFAULTS["cuda"][3] == (64, 128) and bench.QUICK["cuda"] == (bench.GOAL_LENGTH,)
    assert bench.config_from_args([]).dims is None  # each device's default widths
    assert bench.config_from_args(["--cpu-time"]).cpu_time and not bench.Config().cpu_time
    assert bench.config_from_args(["--quick", "--min-run-time", "0.2"]).min_run_time == 0.2  # not overridden
    assert bench.config_from_args([]).min_run_time == bench.Config().min_run_time


def test_threads_with_cpu_time_is_refused_not_ignored(capsys):
    with pytest.raises(ValueError, match="expected --threads 1 or none with --cpu-time .* got --threads 4"):
        bench.config_from_args(["--cpu-time", "--threads", "4"])
    assert bench.config_from_args(["--cpu-time", "--threads", "1"]).cpu_time
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--cpu-time", "--threads", "4"])
    assert exit_info.value.code == 2 and "expected --threads 1 or none" in capsys.readouterr().err


def test_cpu_time_clock_runs_on_tiny_sizes():
    config = bench.Config(lengths=(8,), batch=1, heads=1, dims=(4,), devices=("cpu",), min_run_time=0.001,
                          rounds=1, cpu_time=True, causal=(False,), modes=("fwd",))
    rows = bench.run(config, progress=False)
    assert [r["path"] for r in rows] == list(bench.PATHS)
    assert all(r["time_s"] > 0 for r in rows if not r["absent"])


def test_main_prints_the_table(capsys):
    bench.main(["--lengths", "8", "--heads", "1", "--dims", "4", "--min-run-time", "0.001", "--rounds", "1",
                "--devices", "cpu", "--no-progress"])
    captured = capsys.readouterr()
    assert all(path in captured.out for path in bench.PATHS) and "×base" in captured.out
    assert captured.err == ""
    assert bench.machine() in captured.out and bench.versions() in captured.out
    assert "command: python -m attnlib.bench --lengths 8" in captured.out
