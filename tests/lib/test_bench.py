"""attnlib.bench's pure parts on tiny sizes: every path is correct and the table has every row and column.

No timing is asserted: speed is what the benchmark prints, not what a test checks.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlib import bench

TINY = bench.Config(lengths=(8, 16), batch=1, heads=2, dim=4, devices=("cpu",), min_run_time=0.001, rounds=1)


@pytest.fixture(scope="module")
def rows():
    return bench.run(TINY, progress=False)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("path", list(bench.PATHS))
def test_every_path_computes_torch_sdpa(path, is_causal):
    query, key, value = bench.make_inputs(2, 3, 12, 8, dtype=torch.float64)
    result = bench.PATHS[path](query, key, value, is_causal)
    output = result[0] if isinstance(result, tuple) else result
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=1e-10)


def test_make_inputs_is_seeded():
    first, second = bench.make_inputs(1, 2, 5, 4, seed=3), bench.make_inputs(1, 2, 5, 4, seed=3)
    assert all(torch.equal(a, b) and a.shape == (1, 2, 5, 4) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[0], first[1])


def test_run_has_one_row_per_length_and_path(rows):
    assert [(r["L"], r["path"]) for r in rows] == [(n, p) for n in TINY.lengths for p in bench.PATHS]
    for r in rows:
        assert r["time_s"] > 0 and r["peak_bytes"] > 0
        assert {"device", "dtype", "time_ratio", "peak_ratio"} <= set(r)
    baseline = [r for r in rows if r["path"] == bench.BASELINE]
    assert all(r["time_ratio"] == 1.0 and r["peak_ratio"] == 1.0 for r in baseline)


def test_table_has_every_row_and_column(rows):
    lines = bench.format_table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(column in lines[0] for column in bench.COLUMNS)
    for line, r in zip(lines[2:], rows, strict=True):
        assert len(line.split()) >= len(bench.COLUMNS) and r["path"] in line and str(r["L"]) in line


def test_summary_names_the_three_headline_ratios(rows):
    text = "\n".join(bench.summary(rows))
    for pair in ("attnlib weights / torch softmax", "attnlib fast / torch SDPA", "attnlib flash / attnlib weights"):
        assert pair in text
    assert "L=16" in text and "L=8" not in text


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


def test_command_line_options():
    assert bench.config_from_args(["--quick"]).lengths == (128, 256, 512)
    config = bench.config_from_args(["--lengths", "8", "16", "--heads", "2", "--causal", "--devices", "cpu"])
    assert config.lengths == (8, 16) and config.heads == 2 and config.is_causal and config.devices == ("cpu",)
    assert max(bench.Config().lengths) >= 8192
    assert bench.config_from_args(["--cpu-time"]).cpu_time and not bench.Config().cpu_time
    assert bench.config_from_args(["--quick"]).min_run_time == 0.05
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
    config = bench.Config(lengths=(8,), batch=1, heads=1, dim=4, devices=("cpu",), min_run_time=0.001, rounds=1,
                          cpu_time=True)
    rows = bench.run(config, progress=False)
    assert [r["path"] for r in rows] == list(bench.PATHS) and all(r["time_s"] > 0 for r in rows)


def test_main_prints_the_table(capsys):
    bench.main(["--lengths", "8", "--heads", "1", "--dim", "4", "--min-run-time", "0.001", "--rounds", "1",
                "--devices", "cpu", "--no-progress"])
    captured = capsys.readouterr()
    assert all(path in captured.out for path in bench.PATHS) and "time ×SDPA" in captured.out
    assert captured.err == ""
    assert bench.machine() in captured.out
