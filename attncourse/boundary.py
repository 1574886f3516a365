"""The boundary between the grader and a student's code: the student's kernel, sandboxed, and calls into it.

``StudentKernel`` runs a student's notebook in a sandboxed IPython kernel (attncourse/sandbox.py) with nbclient,
one cell at a time, each cell bounded in wall time and in the output kept. Afterwards the kernel stays up:
``call(name, args, kwargs)`` calls the student's function ``name`` there and brings back only *data*: the
result (NumPy arrays and torch tensors through ``np.load(allow_pickle=False)``, numbers, strings, lists,
tuples, dicts of those), the warnings the call emitted and the exception it raised, by name. Nothing the
student's process sends back is code or a pickle, so nothing it patched in its own process (``np.testing``,
``warnings``, builtins) reaches the process that compares (attncourse/verdict.py).
"""

from __future__ import annotations

import json
import pickle
import sys
import time
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from attncourse.sandbox import ONE_THREAD, Limits, kernel_argv, kernel_env, write_kernelspec

RESULT_BYTES = 64 * 2**20  # a larger answer is refused (the sandbox's file size limit stops it first)

# Run in the student's kernel before its first call, as a cell: the helper that runs a call there and writes the
# outcome as data (a module of its own, imported by nothing here: its text is what is sent).
HELPER = Path(__file__).with_name("kernel_helper.py")


# After a cell's time limit the kernel is interrupted (again each time limit), and it has this long to answer;
# then the grader stops waiting. nbclient alone waits for the reply forever, and a reply can be lost: a student can
# patch the kernel's replies away, and on a busy machine the reply to an interrupted endless loop once never came,
# though the kernel sat idle (ipykernel 7.4; make test hung on the hostile class).
INTERRUPT_GRACE_S = 20.0
NO_REPLY = {"status": "error", "ename": "TimeoutError", "evalue": "the kernel did not answer", "traceback": []}


class _Client(NotebookClient):
    """nbclient, noting when a cell ran past its time limit (whatever outputs the interrupt left), and giving up on
    a reply that does not come within ``INTERRUPT_GRACE_S`` of the interrupt (``lost_reply``)."""

    timed_out = False
    lost_reply = False
    interrupted_at: float | None = None

    def begin_cell(self) -> None:
        self.timed_out, self.lost_reply, self.interrupted_at = False, False, None

    async def _async_handle_timeout(self, timeout, cell=None):
        self.timed_out = True
        if self.interrupted_at is None:
            self.interrupted_at = time.monotonic()
        elif time.monotonic() - self.interrupted_at >= INTERRUPT_GRACE_S:
            self.lost_reply = True
            return {"content": dict(NO_REPLY)}  # nbclient takes it for the reply (its error_on_timeout path)
        return await super()._async_handle_timeout(timeout, cell)


class StudentError(Exception):
    """The student's function raised an exception of a type the grader does not know."""


@dataclass
class Stop:
    """A cell or call of the student's stopped by a limit."""

    where: str  # "cell 12" or "call logsumexp"
    why: str  # "stopped after 30 s", "the kernel died (a limit: CPU seconds or memory)"


@dataclass
class StudentKernel:
    """A student's notebook in a sandboxed kernel (see the module docstring)."""

    scratch: Path
    limits: Limits = field(default_factory=Limits)
    sandbox: bool = True
    stops: list[Stop] = field(default_factory=list)
    dead: bool = False

    def __post_init__(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.spec = self.scratch.parent / f"{self.scratch.name}-spec"
        name = write_kernelspec(self.spec, kernel_argv(self.scratch, self.limits, self.sandbox),
                                {**ONE_THREAD, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
                                 "PYDEVD_DISABLE_FILE_VALIDATION": "1", **kernel_env()})
        self.km = AsyncKernelManager(kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(self.spec / "kernels")]),
                                     kernel_name=name, transport="ipc", ip=str(self.scratch / "kernel"),
                                     connection_file=str(self.scratch / "kernel.json"))
        self.calls = 0

    def run(self, nb: nbformat.NotebookNode, chapter: frozenset[str] = frozenset()) -> nbformat.NotebookNode:
        """Execute every code cell of ``nb`` (in place) with the limits; the kernel stays up for ``call``.
        A cell whose source is in ``chapter`` (the chapter's own cells, as released) gets ``chapter_cell_s``."""
        self.chapter = chapter
        self.client = _Client(nb, km=self.km, timeout_func=self.timeout, interrupt_on_timeout=True,
                              allow_errors=True, kernel_name="student", record_timing=False,
                              iopub_timeout=30)  # a large output may still be on its way after the reply
        self._kernel = self.client.setup_kernel(cleanup_kc=True, cwd=str(self.scratch))
        self._kernel.__enter__()
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or self.dead:
                continue
            self._execute(cell, index, f"cell {index}")
            bound_outputs(cell, self.limits.output)
        return nb

    def timeout(self, cell) -> float:
        """The wall seconds ``cell`` may run."""
        return self.limits.chapter_cell_s if cell.source in self.chapter else self.limits.cell_s

    def _execute(self, cell, index: int | None, where: str) -> None:
        """Execute one cell of the notebook (``index``) or, with ``index`` None, a cell of the grader's own,
        appended for its run and taken out again (nbclient writes a cell's outputs into the notebook)."""
        if not self._ran(cell, index):
            self.dead = True
            self.stops.append(Stop(where, "the kernel died (a limit: CPU seconds, memory or processes)"))
            return
        if self.client.timed_out:
            self.stops.append(Stop(where, f"stopped after {self.timeout(cell):g} s"))
        if self.client.lost_reply and not self._answers():
            self.dead = True  # the rest of its cells and calls are not run
            why = f"the kernel stopped answering ({INTERRUPT_GRACE_S:g} s after its interrupt)"
            self.stops.append(Stop(where, why))

    def _answers(self) -> bool:
        """After a reply that never came: whether the kernel answers a cell of the grader's own (an idle kernel
        whose reply was lost does; one that still runs the student's code, or drops its replies, does not)."""
        return self._ran(nbformat.v4.new_code_cell("pass"), None) and not self.client.lost_reply

    def _ran(self, cell, index: int | None) -> bool:
        """Execute ``cell`` (see ``_execute``); False when the kernel died."""
        self.client.begin_cell()
        cells = self.client.nb.cells
        if index is None:
            cells.append(cell)
        try:
            self.client.execute_cell(cell, len(cells) - 1 if index is None else index)
        except DeadKernelError:
            return False
        finally:
            if index is None:
                cells.pop()
        return True

    def call(self, name: str, args: tuple, kwargs: dict, trace: bool = False):
        """``name(*args, **kwargs)`` in the student's kernel: (value, warnings, peak traced bytes)."""
        if self.dead:
            raise StudentError(f"{name} cannot run: the student's kernel was stopped by a limit")
        if self.calls == 0:
            self._execute(nbformat.v4.new_code_cell(HELPER.read_text(encoding="utf-8")), None, "the grader's helper")
        self.calls += 1
        request, reply = self.scratch / f"call-{self.calls}.pkl", self.scratch / f"reply-{self.calls}"
        for stale in (reply.with_suffix(".json"), reply.with_suffix(".npz")):
            stale.unlink(missing_ok=True)
        request.write_bytes(pickle.dumps(sendable((args, kwargs, trace))))  # grader -> student: it may read it
        before = len(self.stops)
        self._execute(nbformat.v4.new_code_cell(f"__boundary_call({name!r}, {str(request)!r}, {str(reply)!r})"),
                      None, f"a call of {name}")
        if len(self.stops) > before or self.dead:
            raise StudentError(f"{name}: {self.stops[-1].why}")
        return read_reply(reply, name)

    def close(self) -> None:
        if hasattr(self, "_kernel"):
            self._kernel.__exit__(None, None, None)


HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
         "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks",
         "_load_state_dict_pre_hooks", "_state_dict_pre_hooks", "_load_state_dict_post_hooks")


def sendable(value):
    """``value`` ready to pickle into the student's kernel: a torch module as a copy without its hooks (a library
    may have hung closures on it, e.g. transformers' output capturing, which pickle cannot carry)."""
    if isinstance(value, tuple | list):
        return type(value)(sendable(v) for v in value)
    if isinstance(value, dict):
        return {k: sendable(v) for k, v in value.items()}
    module = sys.modules.get("torch.nn")
    if module is not None and isinstance(value, module.Module):
        copy = deepcopy(value)
        for part in copy.modules():
            for hooks in HOOKS:
                getattr(part, hooks, {}).clear()
        return copy
    return value


def read_reply(reply: Path, name: str):
    """The outcome the helper wrote, as data only: (value, warnings, peak)."""
    path = reply.with_suffix(".json")
    if not path.is_file() or path.stat().st_size > RESULT_BYTES:
        raise StudentError(f"{name}: no readable result came back from the student's kernel")
    outcome = json.loads(path.read_text(encoding="utf-8"))
    with np.load(reply.with_suffix(".npz"), allow_pickle=False) as arrays:
        if "raised" in outcome:
            raise _exception(*outcome["raised"])
        value = decode(outcome["value"], arrays)
    return value, [(str(c), str(m)) for c, m in outcome.get("warnings", [])], int(outcome.get("peak", 0))


def decode(node: dict, arrays):
    kind = node["t"]
    if kind == "plain":
        return node["v"]
    if kind in ("int", "float"):
        return int(node["v"]) if kind == "int" else float(node["v"])
    if kind in ("ndarray", "scalar", "tensor"):
        array = np.array(arrays[node["k"]])
        if kind == "tensor":
            import torch  # noqa: PLC0415

            return torch.from_numpy(array)
        return array[()] if kind == "scalar" else array
    if kind in ("list", "tuple"):
        items = [decode(v, arrays) for v in node["v"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {str(k): decode(v, arrays) for k, v in node["v"].items()}
    raise StudentError(f"expected a result of a known kind, got {kind!r}")


def _exception(kind: str, message: str) -> Exception:
    """The student's exception as one of Python's own types (by name), else ``StudentError``."""
    import builtins  # noqa: PLC0415

    cls = getattr(builtins, str(kind), None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(str(message))
    return StudentError(f"{kind}: {message}")


def bound_outputs(cell, limit: int) -> None:
    """Cut each text output of ``cell`` to ``limit`` characters, with a note saying so."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and len(output.get("text", "")) > limit:
            cut = len(output["text"]) - limit
            output["text"] = output["text"][:limit] + f"\n[... {cut:,} more characters cut by the grader]\n"
        for mime, data in list(output.get("data", {}).items()):
            if isinstance(data, str) and len(data) > limit:
                output["data"][mime] = data[:limit] + f"\n[... {len(data) - limit:,} more characters cut]"
        if output.get("output_type") == "error":
            output["traceback"] = [line[:limit] for line in output.get("traceback", [])[:200]]
