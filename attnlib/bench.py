"""Benchmark: time and peak memory of attnlib's attention paths against torch's, ``python -m attnlib.bench``.

Paths (all compute ``softmax(Q Kᵀ/√Dk) V``), each run forward (``fwd``) and forward + backward (``fwd+bwd``):

* ``attnlib weights``  ``attnlib.scaled_dot_product_attention`` (readable path, returns the weights)
* ``attnlib fast``     the same with ``need_weights=False`` (torch's fused kernel)
* ``attnlib flash``    ``attnlib.flash.FlashAttention`` (tiles + online softmax in pure torch, both passes)
* ``attnlib triton``   ``attnlib.flash_triton.FlashAttention`` (the Triton kernels; timed compiled, on CUDA)
* ``torch softmax``    plain torch ``softmax(Q Kᵀ · scale) V``
* ``torch SDPA``       ``torch.nn.functional.scaled_dot_product_attention``, torch's own choice of kernel
* ``SDPA flash``, ``SDPA efficient``, ``SDPA cuDNN``  the same with one CUDA backend forced (FlashAttention-2,
  memory-efficient, cuDNN)
* ``FlexAttention``    ``attnlib.flex.attention`` (compiled on CUDA; eager, forward only, on a CPU)

The ratios are to ``torch SDPA`` on a CPU and to ``SDPA flash`` (FlashAttention-2) on CUDA, in the same run.
Time: on a CPU the median of ``torch.utils.benchmark.Timer.blocked_autorange``, fastest of a few interleaved
rounds (``--cpu-time``: one thread, timed by its CPU time, which a busy machine disturbs far less); on CUDA
``triton.testing.do_bench``'s median (CUDA events, the L2 cache flushed between calls) when Triton is there.
TFLOP/s counts 4·B·H·Lq·Lk·D per forward (half of it when causal) and 2.5 times that per backward.
Peak memory is the most bytes allocated at once beyond what existed before: for ``fwd`` rows, of the
forward (without gradients), output included; for ``fwd+bwd`` rows, of the **backward** alone, beyond what the
forward kept for it. On CUDA ``torch.cuda.max_memory_allocated``; on a CPU the running sum of every allocation
and free that torch's CPU allocator reports to ``torch.profiler`` (``profile_memory=True``). A path that cannot
run somewhere (a CUDA backend on a CPU, (L, L) matrices that would not fit) is listed with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.benchmark import Timer

from attnlib._checks import require_positive, require_positive_int
from attnlib.attention import scaled_dot_product_attention
from attnlib.device import available_devices, describe_device
from attnlib.flash import FlashAttention

BASELINE = "torch SDPA"
CUDA_BASELINE = "SDPA flash"
MODES = ("fwd", "fwd+bwd")
COLUMNS = ("device", "dtype", "D", "mask", "L", "pass", "path", "time ms", "×base", "TFLOP/s", "peak MiB",
           "peak ×base")


def plain_attention(query, key, value, is_causal: bool = False) -> torch.Tensor:
    """Plain torch ``softmax(Q Kᵀ / √Dk) V`` for (..., L, Dk), (..., L, Dk), (..., L, Dv) -> (..., L, Dv)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., Lq, Lk)
    if is_causal:
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


def _backend(name: str) -> Callable:
    """SDPA with one backend forced: (..., L, Dk), (..., L, Dk), (..., L, Dv) -> (..., L, Dv)."""
    def run(q, k, v, c):
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 - CUDA rows only

        with sdpa_kernel(getattr(SDPBackend, name)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=c)
    return run


def _triton(q, k, v, c) -> torch.Tensor:
    from attnlib import flash_triton  # noqa: PLC0415 - Triton is optional and slow to import

    return flash_triton.FlashAttention.apply(q, k, v, c)[0]


def _flex(q, k, v, c) -> torch.Tensor:
    from attnlib import flex  # noqa: PLC0415 - torch's FlexAttention, imported when used

    mask = _causal_block_mask(q.shape[-2], k.shape[-2], str(q.device)) if c else None
    return flex.attention(q, k, v, mask=mask)


def _causal_block_mask(lq: int, lk: int, device: str):
    from attnlib import flex  # noqa: PLC0415

    key = (lq, lk, device)
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS[key] = flex.block_mask(flex.causal, None, None, lq, lk, device)
    return _BLOCK_MASKS[key]


_BLOCK_MASKS: dict = {}


@dataclass(frozen=True)
class Path:
    """One way to compute attention, ``run(q, k, v, is_causal) -> output``, and where it cannot run.

    ``cuda``: only on CUDA; ``quadratic``: holds (L, L) matrices; ``tiles``: a Python loop over tiles (slow on a
    GPU); ``cpu_backward``: has a backward pass on a CPU.
    """

    run: Callable
    cuda: bool = False
    quadratic: bool = False
    tiles: bool = False
    cpu_backward: bool = True

    def __call__(self, query, key, value, is_causal: bool = False) -> torch.Tensor:
        """The output (..., Lq, Dv) of query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv)."""
        return self.run(query, key, value, is_causal)


PATHS: dict[str, Path] = {
    "attnlib weights": Path(lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c)[0], quadratic=True),
    "attnlib fast": Path(lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c, need_weights=False)[0]),
    "attnlib flash": Path(lambda q, k, v, c: FlashAttention.apply(q, k, v, c)[0], tiles=True),
    "attnlib triton": Path(_triton, cuda=True),
    "torch softmax": Path(lambda q, k, v, c: plain_attention(q, k, v, is_causal=c), quadratic=True),
    BASELINE: Path(lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c)),
    CUDA_BASELINE: Path(_backend("FLASH_ATTENTION"), cuda=True),
    "SDPA efficient": Path(_backend("EFFICIENT_ATTENTION"), cuda=True),
    "SDPA cuDNN": Path(_backend("CUDNN_ATTENTION"), cuda=True),
    "FlexAttention": Path(_flex, cpu_backward=False),
}


@dataclass
class Config:
    """One benchmark run: every device × dtype × head width × mask × length × pass × path.

    ``lengths``, ``batch``, ``heads`` and ``dims`` None take each device's defaults (``DEFAULTS``; heads 1024 // D
    on CUDA, so that every width moves the same bytes).
    """

    lengths: tuple[int, ...] | None = None
    batch: int | None = None
    heads: int | None = None
    dims: tuple[int, ...] | None = None
    devices: tuple[str, ...] = field(default_factory=lambda: tuple(available_devices()[:2]))
    dtypes: tuple[str, ...] = ("float32",)
    cuda_dtypes: tuple[str, ...] = ("bfloat16", "float16")
    paths: tuple[str, ...] = tuple(PATHS)
    causal: tuple[bool, ...] = (False, True)
    modes: tuple[str, ...] = MODES
    min_run_time: float = 0.6
    rounds: int = 3
    cpu_time: bool = False  # time CPU runs by this thread's CPU time (use with 1 thread) instead of wall time
    tile_max_length: int = 1024  # on CUDA, the pure-torch tiles (a Python loop) only up to this length
    quick: bool = False  # the short default lengths (QUICK)
    seed: int = 0


#: Per device type: lengths, batch, heads (None: 1024 // D), head widths.
DEFAULTS = {"cpu": ((512, 1024, 2048, 4096), 1, 4, (64,)),
            "cuda": ((1024, 2048, 4096, 8192, 16384), 4, None, (64, 128))}
QUICK = {"cpu": (128, 256, 512), "cuda": (8192,)}  # on CUDA: the length of the goals (GOAL_LENGTH)


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


def gpu_time(fn: Callable[[], object]) -> float:
    """Median seconds per call of ``fn()`` on a GPU: Triton's do_bench (CUDA events, L2 flushed), else Timer."""
    if importlib.util.find_spec("triton") is None:
        return time_call(fn, 0.3)
    from triton.testing import do_bench  # noqa: PLC0415 - optional

    return do_bench(fn, warmup=25, rep=100, return_mode="median") / 1e3


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
    with _quiet_native_stderr():  # also torch's note when fn frees a tensor made before (a backward frees the graph)
        prof.start()
        try:
            result = fn()
        finally:
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


def _bind(path: str, query, key, value, is_causal: bool) -> Callable[[], torch.Tensor]:
    """The forward call of ``path`` on these inputs."""
    if path not in PATHS:
        raise ValueError(f"expected a path in {list(PATHS)}, got {path!r}")
    run = PATHS[path]
    return lambda: run(query, key, value, is_causal)


def measure(path: str, query, key, value, is_causal: bool = False, min_run_time: float = 0.3,
            clock: Callable[[], float] | None = None) -> dict:
    """Time (s) and peak extra memory (bytes) of one path's forward on (B, H, L, D) inputs; ``clock`` as in
    time_call."""
    call = _bind(path, query, key, value, is_causal)
    return {"time_s": time_call(call, min_run_time, clock), "peak_bytes": peak_bytes(call, query.device)}


def _training_calls(path: str, query, key, value, is_causal: bool):
    """(forward + backward, the backward alone on a fresh forward's graph) for inputs (B, H, L, D)."""
    leaves = [t.detach().requires_grad_() for t in (query, key, value)]
    forward = _bind(path, *leaves, is_causal)
    grad = torch.ones_like(query)

    def step():
        return torch.autograd.grad(forward(), leaves, grad)

    def backward_only():
        output = forward()
        return lambda: torch.autograd.grad(output, leaves, grad)

    return step, backward_only


def flops(batch: int, heads: int, lq: int, lk: int, dim: int, is_causal: bool, mode: str) -> float:
    """Floating-point operations of attention: 4·B·H·Lq·Lk·D per forward, halved when causal, x3.5 with the backward."""
    forward = 4 * batch * heads * lq * lk * dim * (0.5 if is_causal else 1.0)
    return forward * (3.5 if mode == "fwd+bwd" else 1.0)


@dataclass(frozen=True)
class Case:
    """One input of the benchmark: device, dtype, B, H, L, D, causal or not, and the pass (fwd or fwd+bwd)."""

    device: str
    dtype: str
    batch: int
    heads: int
    length: int
    dim: int
    is_causal: bool
    mode: str

    def key(self) -> tuple:
        """What rows of the same input share (the ratios are taken within it)."""
        return (self.device, self.dtype, self.dim, self.is_causal, self.length, self.mode)


def _free_bytes(device: torch.device) -> float:
    """Bytes a path may take: 80% of the GPU's free memory, half the machine's available memory on a CPU."""
    if device.type == "cuda":
        return 0.8 * torch.cuda.mem_get_info(device)[0]
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo", encoding="utf-8") as f:
            available = next(line for line in f if line.startswith("MemAvailable"))
        return 0.5 * int(available.split()[1]) * 1024
    return math.inf


def _device_absent(path: str, case: Case) -> str | None:
    """Why ``path`` cannot run on this device, dtype or pass at all (None: it can)."""
    spec, device = PATHS[path], torch.device(case.device)
    if spec.cuda and device.type != "cuda":
        return "CUDA only" + (" (on a CPU Triton's interpreter runs it, to read and test)" if "triton" in path else "")
    if path == "attnlib triton" and importlib.util.find_spec("triton") is None:
        return "Triton is not installed (pip install 'attnlib[kernels]')"
    if path == "attnlib triton" and case.dtype == "float64":
        return "16- and 32-bit floats only"
    if case.mode == "fwd+bwd" and device.type == "cpu" and not spec.cpu_backward:
        return "no backward pass on a CPU (torch)"
    return None


def absent(path: str, case: Case, config: Config) -> str | None:
    """Why ``path`` is not measured on ``case`` (None: it is): the device, or a cost that would not fit."""
    spec, device = PATHS[path], torch.device(case.device)
    if spec.tiles and device.type == "cuda" and case.length > config.tile_max_length:
        return f"a Python loop over ({case.length}/128)² tiles: --tile-max-length to time it"
    itemsize = torch.empty((), dtype=getattr(torch, case.dtype)).element_size()
    matrices = case.batch * case.heads * case.length**2 * max(itemsize, 4) * (6 if case.mode == "fwd+bwd" else 3)
    if spec.quadratic and matrices > _free_bytes(device):
        return f"its (L, L) matrices would take about {matrices / 2**30:.0f} GiB"
    return _device_absent(path, case)


def _clock(config: Config, device: str):
    """The timer for one device: do_bench on CUDA, Timer (CPU time with --cpu-time) on a CPU."""
    if torch.device(device).type == "cuda":
        return gpu_time
    thread_clock = time.thread_time if config.cpu_time else None
    return lambda fn: time_call(fn, config.min_run_time / config.rounds, thread_clock)


def _calls(path: str, case: Case, inputs) -> tuple[Callable, Callable]:
    """(the timed call, the call whose peak memory is measured) of one path on one case."""
    if case.mode == "fwd":
        forward = _bind(path, *inputs, case.is_causal)

        def inference():
            with torch.no_grad():
                return forward()

        return inference, inference
    step, backward_only = _training_calls(path, *inputs, case.is_causal)
    return step, backward_only


def _row(case: Case, path: str, **values) -> dict:
    """One table row: the case's fields, the path, and its measurements (or why it is absent)."""
    return {"device": case.device, "dtype": case.dtype, "D": case.dim, "causal": case.is_causal, "L": case.length,
            "mode": case.mode, "path": path, "batch": case.batch, "heads": case.heads, "time_s": math.nan,
            "peak_bytes": math.nan, "absent": None, **values}


def _measure_case(config: Config, case: Case, bar) -> list[dict]:
    """Every path on one case; timed in interleaved rounds (CPU) or once by do_bench (CUDA)."""
    inputs = make_inputs(case.batch, case.heads, case.length, case.dim, getattr(torch, case.dtype), case.device,
                         config.seed)
    rows, calls = {}, {}
    for path in config.paths:
        rows[path] = _row(case, path, absent=absent(path, case, config))
        timed = None if rows[path]["absent"] else _prepare(path, case, inputs, rows[path])
        if timed is not None:
            calls[path] = timed
            rows[path]["time_s"] = math.inf
    clock = _clock(config, case.device)
    for _ in range(1 if torch.device(case.device).type == "cuda" else config.rounds):
        for path, timed in calls.items():
            bar.update()
            rows[path]["time_s"] = min(rows[path]["time_s"], clock(timed))
    return list(rows.values())


def _prepare(path: str, case: Case, inputs, row: dict) -> Callable | None:
    """Warm the path up and store its peak memory in ``row``; the call to time, or None if the path failed."""
    timed, peaked = _calls(path, case, inputs)
    try:
        timed()  # warm-up: compilation and one-time workspaces (e.g. cuBLAS) are not a path's peak
        row["peak_bytes"] = peak_bytes(peaked if case.mode == "fwd" else peaked(), case.device)
    except (RuntimeError, ValueError, NotImplementedError) as error:  # e.g. a backend that refuses the shape
        row["absent"] = (str(error).strip().splitlines() or [type(error).__name__])[0][:100]
        if torch.device(case.device).type == "cuda":
            torch.cuda.empty_cache()
        return None
    return timed


def _cases(config: Config) -> list[Case]:
    """Every case of the run, device by device (each with its default lengths, batch and heads unless given)."""
    cases = []
    for device in config.devices:
        kind = torch.device(device).type
        lengths, batch, heads, dims = DEFAULTS.get(kind, DEFAULTS["cpu"])
        lengths = QUICK.get(kind, QUICK["cpu"]) if config.quick else lengths
        dtypes = config.cuda_dtypes if kind == "cuda" else config.dtypes
        for dtype in dtypes:
            for dim in config.dims or dims:
                h = config.heads or heads or max(1, 1024 // dim)
                cases += [Case(device, dtype, config.batch or batch, h, length, dim, causal, mode)
                          for causal in config.causal for length in config.lengths or lengths
                          for mode in config.modes]
    return cases


def _with_ratios(rows: list[dict]) -> list[dict]:
    """Add TFLOP/s and each row's time and memory as a multiple of the baseline's on the same case."""
    for r in rows:
        work = flops(r["batch"], r["heads"], r["L"], r["L"], r["D"], r["causal"], r["mode"])
        r["tflops"] = work / r["time_s"] / 1e12
        base = _baseline(rows, r)
        r["time_ratio"] = r["time_s"] / base["time_s"] if base else math.nan
        r["peak_ratio"] = r["peak_bytes"] / base["peak_bytes"] if base and base["peak_bytes"] else math.nan
    return rows


def _key(row: dict) -> tuple:
    return (row["device"], row["dtype"], row["D"], row["causal"], row["L"], row["mode"])


def _baseline(rows: list[dict], row: dict) -> dict | None:
    """The row the ratios divide by: SDPA's FlashAttention-2 backend on CUDA, torch's SDPA elsewhere."""
    name = CUDA_BASELINE if torch.device(row["device"]).type == "cuda" else BASELINE
    found = [r for r in rows if _key(r) == _key(row) and r["path"] == name and not r["absent"]]
    return found[0] if found else None


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
    """Measure every case × path of ``config``; one dict per (case, path), ratios included."""
    cases = _cases(config)
    rows = []
    total = len(cases) * len(config.paths) * config.rounds
    with _progress(total, progress) as bar:
        for case in cases:
            rows += _measure_case(config, case, bar)
    return _with_ratios(rows)


def _cells(r: dict) -> tuple[str, ...]:
    """One row's cells, in COLUMNS' order; an absent path's numbers are dashes and its reason follows."""
    fixed = (r["device"], r["dtype"], str(r["D"]), "causal" if r["causal"] else "full", str(r["L"]), r["mode"],
             r["path"])
    if r["absent"]:
        return (*fixed, "-", "-", "-", "-", f"- absent: {r['absent']}")
    return (*fixed, f"{1e3 * r['time_s']:.2f}", f"{r['time_ratio']:.2f}", f"{r['tflops']:.3g}",
            f"{r['peak_bytes'] / 2**20:.1f}", f"{r['peak_ratio']:.2f}")


def format_table(rows: list[dict]) -> str:
    """The measurements as an aligned text table with the columns in ``COLUMNS``."""
    cells = [COLUMNS] + [_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in cells if not row[i].startswith("- absent")) for i in range(len(COLUMNS))]
    numeric = (2, 4, 7, 8, 9, 10, 11)
    lines = ["  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in
                       enumerate(zip(row, widths, strict=True))).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


#: The issue's goals, on CUDA in bfloat16 at L = 8192: (pass, path, against, at least this times its speed).
GOALS = (("fwd", "attnlib triton", CUDA_BASELINE, 1.0), ("fwd", "attnlib triton", "SDPA cuDNN", 0.6),
         ("fwd+bwd", "attnlib triton", CUDA_BASELINE, 0.8), ("fwd", "FlexAttention", "SDPA cuDNN", 0.8))
GOAL_LENGTH = 8192
#: On a CPU: the backward's peak memory of the tiles at L = 4096 at most this fraction of the reference path's.
CPU_MEMORY_GOAL = (4096, 0.25)


def _find(rows: list[dict], key: tuple, path: str) -> dict | None:
    found = [r for r in rows if _key(r) == key and r["path"] == path and not r["absent"]]
    return found[0] if found else None


def _cpu_lines(rows: list[dict], key: tuple) -> list[str]:
    """The headline ratios of one CPU case: the readable path vs plain torch, the fast path vs SDPA, memory."""
    device, dtype, dim, causal, length, mode = key
    where = f"{device} {dtype} D={dim} {'causal' if causal else 'full'} L={length} {mode}"
    checks = (("time_s", "attnlib weights", "torch softmax"), ("time_s", "attnlib fast", BASELINE),
              ("peak_bytes", "attnlib flash", "attnlib weights"))
    lines = []
    for what, num, den in checks:
        a, b = _find(rows, key, num), _find(rows, key, den)
        if a and b and b[what]:
            name = "time" if what == "time_s" else ("backward peak" if mode == "fwd+bwd" else "peak")
            ratio = a[what] / b[what]
            goal = ""
            if what == "peak_bytes" and mode == "fwd+bwd" and length == CPU_MEMORY_GOAL[0]:
                goal = f" (goal <= {CPU_MEMORY_GOAL[1]}: {'met' if ratio <= CPU_MEMORY_GOAL[1] else 'MISSED'})"
            lines.append(f"{where}: {name} of {num} / {den} = {ratio:.3f}{goal}")
    return lines


def _goal_lines(rows: list[dict], key: tuple) -> list[str]:
    """The issue's speed goals for one CUDA case, each met or missed."""
    device, dtype, dim, causal, length, mode = key
    lines = []
    for goal_mode, path, against, at_least in GOALS:
        a, b = _find(rows, key, path), _find(rows, key, against)
        if goal_mode == mode and a and b:
            speed = b["time_s"] / a["time_s"]
            verdict = "met" if speed >= at_least else "MISSED"
            lines.append(f"{device} {dtype} D={dim} {'causal' if causal else 'full'} L={length} {mode}: {path} at "
                         f"{speed:.2f}x the speed of {against} (goal >= {at_least}: {verdict})")
    return lines


def summary(rows: list[dict]) -> list[str]:
    """Headline ratios: on a CPU at each group's largest L (and the memory goal's L), on CUDA the goals."""
    lines = []
    for key in dict.fromkeys(_key(r) for r in rows):
        device, dtype, dim, causal, length, mode = key
        if torch.device(device).type == "cuda":
            lines += _goal_lines(rows, key) if dtype == "bfloat16" and length == GOAL_LENGTH else []
            continue
        largest = max(r["L"] for r in rows if _key(r)[:4] == key[:4])
        if length in (largest, CPU_MEMORY_GOAL[0]):
            lines += _cpu_lines(rows, key)
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


def versions() -> str:
    """torch's version (and CUDA's), and Triton's when installed."""
    text = f"torch {torch.__version__}" + (f" (CUDA {torch.version.cuda})" if torch.version.cuda else "")
    if importlib.util.find_spec("triton") is not None:
        import triton  # noqa: PLC0415 - optional

        text += f", Triton {triton.__version__}"
    return text


#: ``--tune``'s candidate launches (block_m, block_n, num_warps, num_stages) for each Triton kernel.
TUNE = {"forward": ((128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 8, 3)),
        "dkdv": ((32, 128, 4, 3), (64, 128, 8, 2), (64, 64, 4, 3)),
        "dq": ((128, 32, 4, 3), (128, 64, 8, 2), (64, 64, 4, 3))}


def _tune_one(kernel: str, launch: Callable, candidates: tuple, work: float) -> list[str]:
    """Time ``launch(config)`` for each candidate; one line per candidate and one naming the fastest."""
    from attnlib.flash_triton import Config  # noqa: PLC0415 - CUDA only

    results, lines = {}, []
    for candidate in candidates:
        config = Config(*candidate)
        try:
            launch(config)
            results[config] = gpu_time(lambda config=config: launch(config))
            lines.append(f"  {kernel:8} {config}: {1e3 * results[config]:.3f} ms, {work / results[config] / 1e12:.0f} "
                         f"TFLOP/s")
        except Exception as error:  # noqa: BLE001 - a launch that does not fit (shared memory, registers) is a result
            lines.append(f"  {kernel:8} {config}: failed ({type(error).__name__}: {str(error).splitlines()[0][:80]})")
    if results:
        lines.append(f"  fastest {kernel}: {min(results, key=results.get)}")
    return lines


def _tune_case(config: Config, dim: int, causal: bool, length: int) -> list[str]:
    """``_tune_one`` for the three kernels on one input (B, H, L, D) on CUDA."""
    from attnlib import flash_triton as ft  # noqa: PLC0415 - CUDA only

    heads, batch = config.heads or max(1, 1024 // dim), config.batch or DEFAULTS["cuda"][1]
    dtype = getattr(torch, config.cuda_dtypes[0])
    q, k, v = (t.reshape(-1, length, dim) for t in make_inputs(batch, heads, length, dim, dtype, "cuda", config.seed))
    scale, fwd = dim**-0.5, flops(batch, heads, length, length, dim, causal, "fwd")
    out, lse = ft.forward(q, k, v, 1, causal, scale)
    do = torch.randn_like(q)
    delta = (do.float() * out.float()).sum(-1)
    lines = [f"{config.cuda_dtypes[0]} B={batch} H={heads} L={length} D={dim} {'causal' if causal else 'full'}:"]
    lines += _tune_one("forward", lambda c: ft.forward(q, k, v, 1, causal, scale, c), TUNE["forward"], fwd)
    lines += _tune_one("dkdv", lambda c: ft.backward_dkdv(do, q, k, v, lse, delta, 1, causal, scale, c),
                       TUNE["dkdv"], 2.0 * fwd)  # its four products: S again, dV, dP and dK
    lines += _tune_one("dq", lambda c: ft.backward_dq(do, q, k, v, lse, delta, 1, causal, scale, c),
                       TUNE["dq"], 1.5 * fwd)  # its three: S, dP and dQ
    return lines


def tune(config: Config) -> Iterator[str]:
    """Time the Triton kernels' candidate launches (``TUNE``) on CUDA at each D and mask, first CUDA dtype, L.

    Yields the report's lines as each input is done.
    """
    length = max(config.lengths or (GOAL_LENGTH,))
    for dim in config.dims or DEFAULTS["cuda"][3]:
        for causal in config.causal:
            yield from _tune_case(config, dim, causal, length)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnlib.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", help="sequence lengths L (default per device: "
                   f"{', '.join(f'{k} {v[0]}' for k, v in DEFAULTS.items())})")
    p.add_argument("--batch", type=int, help="batch size B (default 1 on a CPU, 4 on CUDA)")
    p.add_argument("--heads", type=int, help="heads H (default 4 on a CPU, 1024 // D on CUDA)")
    p.add_argument("--dims", "--dim", type=int, nargs="+", help="head widths D (default 64 on a CPU, 64 128 on CUDA)")
    p.add_argument("--devices", nargs="+", help=f"devices (default: {' '.join(Config().devices)})")
    p.add_argument("--cuda-dtypes", nargs="+", default=list(Config.cuda_dtypes), help="dtypes on CUDA")
    p.add_argument("--paths", nargs="+", choices=list(PATHS), metavar="PATH", help="paths (default: all)")
    p.add_argument("--masks", nargs="+", choices=["full", "causal"], default=["full", "causal"],
                   help="full and/or causal attention (default both)")
    p.add_argument("--causal", action="store_true", help="causal attention only (--masks causal)")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="passes (default both)")
    p.add_argument("--min-run-time", type=float, help="CPU: seconds of timing per path and L (default 0.6; 0.05 "
                   "with --quick)")
    p.add_argument("--rounds", type=int, default=3, help="CPU: interleaved timing rounds; the fastest counts")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    p.add_argument("--cpu-time", action="store_true",
                   help="on CPU, one thread timed by its CPU time: steadier on a busy machine")
    p.add_argument("--tile-max-length", type=int, default=1024,
                   help="on CUDA, time attnlib flash's Python loop of tiles only up to this L (default 1024)")
    p.add_argument("--quick", action="store_true", help="short: L 128 256 512 on a CPU; on CUDA the goals' case, "
                   "L 8192 in bfloat16; short timing")
    p.add_argument("--tune", action="store_true", help="time the Triton kernels' candidate tile sizes (CUDA) instead")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def config_from_args(argv: list[str] | None = None) -> Config:
    """The Config that the command line ``argv`` asks for."""
    return _config(_parser().parse_args(argv))


def _config(args: argparse.Namespace) -> Config:
    if args.cpu_time and args.threads not in (None, 1):
        raise ValueError(f"expected --threads 1 or none with --cpu-time (it times one thread), "
                         f"got --threads {args.threads}")
    min_run_time = args.min_run_time if args.min_run_time is not None else (0.05 if args.quick else Config.min_run_time)
    config = Config(lengths=tuple(args.lengths) if args.lengths else None, batch=args.batch, heads=args.heads,
                    dims=tuple(args.dims) if args.dims else None, cuda_dtypes=tuple(args.cuda_dtypes),
                    min_run_time=min_run_time,
                    causal=(True,) if args.causal else tuple(m == "causal" for m in args.masks),
                    modes=tuple(args.modes), rounds=args.rounds, cpu_time=args.cpu_time,
                    tile_max_length=args.tile_max_length, quick=args.quick)
    if args.quick:
        config.cuda_dtypes = ("bfloat16",)
    if args.paths:
        config.paths = tuple(args.paths)
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
    print(f"attention benchmark on {machine()}; {versions()}")
    print(f"command: python -m attnlib.bench {' '.join(argv if argv is not None else sys.argv[1:])}")
    if args.tune:
        for line in tune(config):
            print(line, flush=True)
        return 0
    _allow_recompiles()
    rows = run(config, progress=not args.no_progress)
    clock = "CPU time of one thread" if config.cpu_time else "wall-clock"
    print(f"CPU: {clock}, median of torch.utils.benchmark, fastest of {config.rounds} rounds; CUDA: median of "
          f"triton.testing.do_bench. TFLOP/s: 4·B·H·L²·D per forward (half if causal), 3.5x that with the backward. "
          f"peak: most extra bytes at once (fwd: of the forward, output included; fwd+bwd: of the backward alone)")
    print(format_table(rows))
    print("\n".join(summary(rows)))
    return 0


def _allow_recompiles() -> None:
    """Let torch.compile keep one FlexAttention graph per dtype, width, mask and pass (its default limit is 8)."""
    with contextlib.suppress(ImportError, AttributeError):
        import torch._dynamo  # noqa: PLC0415 - only when FlexAttention is compiled

        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                     "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 256))


if __name__ == "__main__":
    sys.exit(main())
