"""Which device attnlib computes on: CUDA, then Apple MPS, then CPU.

The environment variable ``ATTNLIB_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``) overrides the
choice. Every attnlib function keeps the device and dtype of its inputs; ``get_device()`` is only
where the book's chapters create their tensors.
"""

from __future__ import annotations

import os

import torch

ENV_VAR = "ATTNLIB_DEVICE"
DTYPE_VAR = "ATTNLIB_DTYPE"  # float32: compute in the precision of Apple's MPS on any device (exact_dtype)


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


def _available(device: torch.device) -> bool:
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        index = device.index or 0
        return torch.cuda.is_available() and index < torch.cuda.device_count()
    if device.type == "mps":
        return _mps_available()
    return False


def _parse(text: str) -> torch.device:
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise ValueError(f"expected {ENV_VAR} to be one of cpu, cuda, cuda:N, mps; got {text!r}") from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"expected {ENV_VAR} to be one of cpu, cuda, cuda:N, mps; got {text!r}")
    return device


def get_device() -> torch.device:
    """The device to compute on: ``$ATTNLIB_DEVICE`` if set, else CUDA, then MPS, then CPU.

    Raises ValueError if ``$ATTNLIB_DEVICE`` names an unknown device or one this machine lacks.
    """
    text = os.environ.get(ENV_VAR, "").strip()
    if text:
        device = _parse(text.lower())
        if not _available(device):
            raise ValueError(f"{ENV_VAR}={text!r} asks for a device this machine does not have "
                             f"(available: {', '.join(available_devices())})")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def available_devices() -> list[str]:
    """Names of the devices this machine has, e.g. ``['cpu', 'cuda:0']``."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_available():
        names.append("mps")
    return names


def _as_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a torch.device (None: ``get_device()``), or a ValueError naming what came."""
    if device is None:
        return get_device()
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"expected a device such as 'cpu', 'cuda:0' or 'mps', got {device!r}") from None


def describe_device(device: torch.device | str | None = None) -> str:
    """A human-readable name for ``device`` (default: ``get_device()``), e.g. for plot labels."""
    device = _as_device(device)
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def exact_dtype(device: torch.device | str | None = None) -> torch.dtype:
    """The most precise float dtype of ``device`` (default: ``get_device()``): float64, or float32 on MPS.

    Apple's MPS has no float64. The chapters compute in this dtype, so on CPU and CUDA their
    numbers agree with NumPy's float64 to ~1e-12 and on MPS to float32's ~1e-6. ``ATTNLIB_DTYPE=float32``
    gives float32 on any device: the chapters' claims are checked at MPS's precision on a CPU (``make test``).
    """
    forced = os.environ.get(DTYPE_VAR, "")
    if forced not in ("", "float32", "float64"):
        raise ValueError(f"expected {DTYPE_VAR} to be float32 or float64 (or unset), got {forced!r}")
    if forced:
        return getattr(torch, forced)
    return torch.float32 if _as_device(device).type == "mps" else torch.float64
