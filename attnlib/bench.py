"""Benchmark: time and peak memory of attnlib's attention paths against torch, ``python -m attnlib.bench``.

Paths (all compute the same ``softmax(Q Kᵀ/√Dk) V``):

* ``attnlib weights``  ``attnlib.scaled_dot_product_attention`` (readable path, returns the weights)
* ``attnlib fast``     the same with ``need_weights=False`` (torch's fused kernel)
* ``attnlib flash``    ``attnlib.flash.flash_attention`` (tiles + online softmax, pure torch)
* ``torch softmax``    plain torch ``softmax(Q Kᵀ · scale) V``
* ``torch SDPA``       ``torch.nn.functional.scaled_dot_product_attention``

Time is the median of ``torch.utils.benchmark.Timer.blocked_autorange`` (it synchronises CUDA),
fastest of a few interleaved rounds; ``--cpu-time`` times CPU runs on one thread by that thread's CPU
time, which a busy machine disturbs far less than wall-clock time.
Peak memory is the most bytes the call had allocated at once beyond what existed before it: on CUDA
``torch.cuda.max_memory_allocated``; on CPU the running sum of every allocation and free that torch's
CPU allocator reports to ``torch.profiler`` (``profile_memory=True``). Both count the output too.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.benchmark import Timer

from attnlib._checks import require_positive, require_positive_int
from attnlib.attention import scaled_dot_product_attention
from attnlib.device import available_devices, describe_device
from attnlib.flash import flash_attention

BASELINE = "torch SDPA"
COLUMNS = ("device", "dtype", "L", "path", "time ms", "time ×SDPA", "peak MiB", "peak ×SDPA")


def plain_attention(query, key, value, is_causal: bool = False) -> torch.Tensor:
    """Plain torch ``softmax(Q Kᵀ / √Dk) V`` for (..., L, Dk), (..., L, Dk), (..., L, Dv) -> (..., L, Dv)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., Lq, Lk)
    if is_causal:
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


PATHS: dict[str, Callable] = {
    "attnlib weights": lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c),
    "attnlib fast": lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c, need_weights=False),
    "attnlib flash": lambda q, k, v, c: flash_attention(q, k, v, is_causal=c),
    "torch softmax": lambda q, k, v, c: plain_attention(q, k, v, is_causal=c),
    BASELINE: lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c),
}


@dataclass
class Config:
    """One benchmark run: every device × dtype × length × path at (batch, heads, L, dim)."""

    lengths: tuple[int, ...] = (512, 1024, 2048, 4096, 8192)
    batch: int = 1
    heads: int = 4
    dim: int = 64
    devices: tuple[str, ...] = field(default_factory=lambda: tuple(available_devices()[:2]))
    dtypes: tuple[str, ...] = ("float32",)
    cuda_dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16")
    paths: tuple[str, ...] = tuple(PATHS)
    is_causal: bool = False
    min_run_time: float = 0.6
    rounds: int = 3
    cpu_time: bool = False  # time CPU runs by this thread's CPU time (use with 1 thread) instead of wall time
    seed: int = 0


def make_inputs(batch: int, heads: int, length: int, dim: int, dtype=torch.float32, device="cpu",
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded standard-normal query, key, value, each (B, H, L, D), on ``device`` in ``dtype``."""
    for name, n in (("batch", batch), ("heads", heads), ("length", length), ("dim", dim)):
        require_positive_int(name, n)
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(batch, heads, length, dim, generator=gen).to(device=device, dtype=dtype)
                 for _ in range(3))


def time_call(fn: Callable[[], object], min_run_time: float = 0.3, clock: Callable[[], float] | None = None) -> float:
    """Median seconds per call of ``fn()`` (torch.utils.benchmark: warm-up, CUDA sync, all threads).

    ``clock`` defaults to Timer's wall clock, which synchronises a GPU; ``time.thread_time`` counts only
    this thread's CPU time (for CPU runs).
    """
    require_positive("min_run_time", min_run_time)
    own_clock = {"timer": clock} if clock is not None else {}  # Timer's default clock syncs the accelerator
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads(), **own_clock)
    return timer.blocked_autorange(min_run_time=min_run_time).median


@contextlib.contextmanager
def _quiet_native_stderr():
    """Send C-level stderr (file descriptor 2) to /dev/null: the profiler logs its start and stop there."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _peak_of(events) -> int:
    """Peak of the running sum of allocation (+bytes) and free (-bytes) events, in time order."""
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """Most bytes ``fn()`` had allocated at once on the CPU (output included), from torch.profiler."""
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_native_stderr():
        prof.start()
    try:
        result = fn()
    finally:
        with _quiet_native_stderr():
            prof.stop()
    del result
    events = prof.profiler.kineto_results.events()
    return _peak_of(e for e in events if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)


def cuda_peak_bytes(fn: Callable[[], object], device) -> int:
    """Most bytes ``fn()`` had allocated at once on a CUDA device beyond what existed before it."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    result = fn()
    torch.cuda.synchronize(device)
    del result
    return torch.cuda.max_memory_allocated(device) - before


def peak_bytes(fn: Callable[[], object], device) -> int:
    """Peak extra bytes of ``fn()`` on ``device`` (CUDA allocator stats, else the CPU profiler)."""
    device = torch.device(device)
    return cuda_peak_bytes(fn, device) if device.type == "cuda" else cpu_peak_bytes(fn)


def measure(path: str, query, key, value, is_causal: bool = False, min_run_time: float = 0.3,
            clock: Callable[[], float] | None = None) -> dict:
    """Time (s) and peak extra memory (bytes) of one path on (B, H, L, D) inputs; ``clock`` as in time_call."""
    call = _bind(path, query, key, value, is_causal)
    return {"time_s": time_call(call, min_run_time, clock), "peak_bytes": peak_bytes(call, query.device)}


def _bind(path: str, query, key, value, is_causal: bool) -> Callable[[], object]:
    if path not in PATHS:
        raise ValueError(f"expected a path in {list(PATHS)}, got {path!r}")
    fn = PATHS[path]
    return lambda: fn(query, key, value, is_causal)


def _measure_case(config: Config, device: str, dtype: str, length: int, bar) -> list[dict]:
    """Every path on one input; timed in ``config.rounds`` interleaved rounds, keeping each path's fastest."""
    q, k, v = make_inputs(config.batch, config.heads, length, config.dim, getattr(torch, dtype), device, config.seed)
    calls = {path: _bind(path, q, k, v, config.is_causal) for path in config.paths}
    for call in calls.values():  # warm up first: one-time workspaces (e.g. cuBLAS) are not a path's peak
        call()
    rows = {path: {"device": device, "dtype": dtype, "L": length, "path": path,
                   "time_s": float("inf"), "peak_bytes": peak_bytes(call, device)} for path, call in calls.items()}
    clock = time.thread_time if config.cpu_time and torch.device(device).type == "cpu" else None
    for _ in range(config.rounds):
        for path, call in calls.items():
            bar.set_description(f"{device} {dtype} L={length} {path}")
            seconds = time_call(call, config.min_run_time / config.rounds, clock)
            rows[path]["time_s"] = min(rows[path]["time_s"], seconds)
            bar.update()
    return list(rows.values())


def _cases(config: Config) -> list[tuple[str, str, int]]:
    cases = []
    for device in config.devices:
        dtypes = config.cuda_dtypes if torch.device(device).type == "cuda" else config.dtypes
        cases += [(device, dtype, length) for dtype in dtypes for length in config.lengths]
    return cases


def _with_ratios(rows: list[dict]) -> list[dict]:
    """Add each row's time and memory as a multiple of torch SDPA's on the same device, dtype and L."""
    base = {(r["device"], r["dtype"], r["L"]): r for r in rows if r["path"] == BASELINE}
    for r in rows:
        ref = base.get((r["device"], r["dtype"], r["L"]))
        r["time_ratio"] = r["time_s"] / ref["time_s"] if ref else float("nan")
        r["peak_ratio"] = r["peak_bytes"] / ref["peak_bytes"] if ref and ref["peak_bytes"] else float("nan")
    return rows


class _NoBar:
    """Stands in for tqdm's bar where tqdm is not installed (attnlib does not depend on it)."""

    def update(self, n: int = 1) -> None:
        """Nothing to show."""


def _progress(total: int, progress: bool):
    """tqdm's bar on stderr when asked and installed (transformers brings tqdm), else a bar that shows nothing."""
    try:
        from tqdm import tqdm  # noqa: PLC0415 - optional
    except ImportError:
        return contextlib.nullcontext(_NoBar())
    return tqdm(total=total, disable=not progress, file=sys.stderr, unit="timing")


def run(config: Config, progress: bool = True) -> list[dict]:
    """Measure every device × dtype × L × path of ``config``; one dict per measurement, ratios included."""
    cases = _cases(config)
    rows = []
    total = len(cases) * len(config.paths) * config.rounds
    with _progress(total, progress) as bar:
        for device, dtype, length in cases:
            rows += _measure_case(config, device, dtype, length, bar)
    return _with_ratios(rows)


def format_table(rows: list[dict]) -> str:
    """The measurements as an aligned text table with the columns in ``COLUMNS``."""
    cells = [COLUMNS] + [(r["device"], r["dtype"], str(r["L"]), r["path"], f"{1e3 * r['time_s']:.2f}",
                          f"{r['time_ratio']:.2f}", f"{r['peak_bytes'] / 2**20:.1f}", f"{r['peak_ratio']:.1f}")
                         for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) if i in (2, 4, 5, 6, 7) else c.ljust(w) for i, (c, w) in
                       enumerate(zip(row, widths, strict=True))).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _ratio(rows, device, dtype, length, key, num, den) -> float | None:
    found = {r["path"]: r[key] for r in rows if (r["device"], r["dtype"], r["L"]) == (device, dtype, length)}
    if num not in found or den not in found or not found[den]:
        return None
    return found[num] / found[den]


def summary(rows: list[dict]) -> list[str]:
    """The headline ratios per device and dtype at the largest L: weights vs plain torch, fast vs SDPA, memory."""
    lines = []
    for device, dtype in dict.fromkeys((r["device"], r["dtype"]) for r in rows):
        length = max(r["L"] for r in rows if (r["device"], r["dtype"]) == (device, dtype))
        checks = (("time", "attnlib weights", "torch softmax"), ("time", "attnlib fast", BASELINE),
                  ("peak", "attnlib flash", "attnlib weights"))
        for what, num, den in checks:
            ratio = _ratio(rows, device, dtype, length, "time_s" if what == "time" else "peak_bytes", num, den)
            if ratio is not None:
                lines.append(f"{device} {dtype} L={length}: {what} of {num} / {den} = {ratio:.3f}")
    return lines


def machine() -> str:
    """The machine the figures come from: CPU model, torch threads, and the accelerator if any."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    accel = [describe_device(d) for d in available_devices() if not d.startswith("cpu")]
    threads = torch.get_num_threads()
    return f"{cpu}, {threads} torch thread{'s' if threads != 1 else ''}" + (f"; {', '.join(accel)}" if accel else "")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnlib.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", help="sequence lengths L (default 512 ... 8192)")
    p.add_argument("--batch", type=int, default=1, help="batch size B (default 1)")
    p.add_argument("--heads", type=int, default=4, help="heads H (default 4)")
    p.add_argument("--dim", type=int, default=64, help="head width D (default 64)")
    p.add_argument("--devices", nargs="+", help=f"devices (default: {' '.join(Config().devices)})")
    p.add_argument("--causal", action="store_true", help="causal attention")
    p.add_argument("--min-run-time", type=float,
                   help="seconds of timing per path and L (default 0.6; 0.05 with --quick)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds; the fastest counts (default 3)")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    p.add_argument("--cpu-time", action="store_true",
                   help="on CPU, one thread timed by its CPU time: steadier on a busy machine")
    p.add_argument("--quick", action="store_true", help="small lengths (128 256 512), short timing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def config_from_args(argv: list[str] | None = None) -> Config:
    """The Config that the command line ``argv`` asks for."""
    return _config(_parser().parse_args(argv))


def _config(args: argparse.Namespace) -> Config:
    if args.cpu_time and args.threads not in (None, 1):
        raise ValueError(f"expected --threads 1 or none with --cpu-time (it times one thread), "
                         f"got --threads {args.threads}")
    lengths = args.lengths or ((128, 256, 512) if args.quick else Config.lengths)
    min_run_time = args.min_run_time if args.min_run_time is not None else (0.05 if args.quick else Config.min_run_time)
    config = Config(lengths=tuple(lengths), batch=args.batch, heads=args.heads, dim=args.dim,
                    is_causal=args.causal, min_run_time=min_run_time, rounds=args.rounds, cpu_time=args.cpu_time)
    if args.devices:
        config.devices = tuple(args.devices)
    return config


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark the command line asks for and print the table and the headline ratios."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = _config(args)
    except ValueError as error:
        parser.error(str(error))  # usage and the message on stderr, exit status 2
    if args.threads or args.cpu_time:
        require_positive_int("threads", 1 if args.cpu_time else args.threads)
        torch.set_num_threads(1 if args.cpu_time else args.threads)
    rows = run(config, progress=not args.no_progress)
    print(f"attention benchmark on {machine()}; torch {torch.__version__}")
    clock = "CPU time of one thread on CPU" if config.cpu_time else "wall-clock"
    print(f"B={config.batch} H={config.heads} D={config.dim} causal={config.is_causal}; time = {clock}, median of "
          f"torch.utils.benchmark, fastest of {config.rounds} rounds; peak = most extra bytes allocated at once "
          f"(output included)")
    print(format_table(rows))
    print("\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
