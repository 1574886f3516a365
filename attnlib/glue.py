"""Numbers computed in a chapter, put into its prose: ``glue(name, value)`` and ``{glue:text}`name```.

On the website, myst-nb's ``glue`` stores a value in the cell's outputs and the book build puts its text
wherever the prose says ``{glue:text}`name```. The students' environment (``requirements.txt``) has no
myst-nb, so the chapters import ``glue`` from here: myst-nb's own function where myst-nb is installed,
otherwise :func:`record`, which stores exactly the output myst-nb stores (strict nbval compares the same
outputs in both environments; ``tests/lib/test_glue.py`` checks that they are identical).

The output is an IPython display: the value's formatted representations (``text/plain``, and
``text/html``/``image/png``... where the value has them), each MIME type prefixed with
``application/papermill.record/`` when ``display=False`` (Jupyter then shows nothing), and the metadata
``{"scrapbook": {"name": name, "mime_prefix": prefix}}`` by which the book build and the student release
(``course/markup.py``) find it.

**A glued float carries the digits the page shows, no more** (CONTRIBUTING.md, "Numbers every CPU reproduces"):
``glue("w", 0.9161047784667921, digits=3)`` stores ``0.916``. A float's full repr holds float noise in its last
digits, and which noise depends on the CPU's vector instructions (torch and NumPy pick AVX2, AVX-512 or plain
code at run time), so a stored repr is a promise only the executing machine keeps. ``glue`` refuses a float
(Python's, NumPy's or a one-element tensor's) without ``digits``; integers, strings and other values pass as
they are.
"""

from __future__ import annotations

import numbers
from typing import Any

HIDDEN_PREFIX = "application/papermill.record/"  # the prefix of a value glued with display=False


def glue_output(name: str, value: Any, display: bool = True) -> tuple[dict, dict]:
    """``(data, metadata)``: the display output that gluing ``value`` under ``name`` stores."""
    from IPython.core.formatters import format_display_data  # noqa: PLC0415 - only inside a kernel

    data, metadata = format_display_data(value)
    prefix = "" if display else HIDDEN_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    return {prefix + mime: content for mime, content in data.items()}, metadata


def record(name: str, value: Any, display: bool = True) -> None:
    """Store ``value`` under ``name`` in the running cell's outputs, as myst-nb's ``glue`` does."""
    from IPython.display import display as show  # noqa: PLC0415 - only inside a kernel

    data, metadata = glue_output(name, value, display)
    show(data, raw=True, metadata=metadata)


def rounded(name: str, value: Any, digits: int | None) -> Any:
    """``value`` as ``glue`` stores it: a float rounded to ``digits`` decimals (a Python float, so its repr is
    short); anything else unchanged. A float without ``digits``, or ``digits`` given for a non-float, is refused."""
    if digits is not None and (isinstance(digits, bool) or not isinstance(digits, int) or not 0 <= digits <= 15):
        raise ValueError(f"glue({name!r}): digits must be an int from 0 to 15 (the decimals the page shows), "
                         f"got {digits!r}")
    number = _as_float(value)
    if number is None:
        if digits is not None:
            raise TypeError(f"glue({name!r}): digits={digits} rounds a float, but the value is "
                            f"{type(value).__name__} {value!r:.60}")
        return value
    if digits is None:
        raise TypeError(f"glue({name!r}): a float needs digits=N, the decimals the page shows "
                        f"(e.g. digits=2 for {{glue:text}}`{name}:.2f`); got {number!r}, whose last digits "
                        "depend on the CPU that computed it")
    return round(number, digits)


def _as_float(value: Any) -> float | None:
    """``value`` as a Python float when it is a real non-integer number (float, NumPy float, a one-element float
    tensor or array), else ``None``."""
    if isinstance(value, (bool, numbers.Integral)):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    dtype = getattr(value, "dtype", None)
    if dtype is not None and callable(getattr(value, "item", None)):
        count = value.numel() if callable(getattr(value, "numel", None)) else getattr(value, "size", None)
        is_float = getattr(dtype, "is_floating_point", None)
        floating = is_float if isinstance(is_float, bool) else getattr(dtype, "kind", "") == "f"
        if count == 1 and floating:
            return float(value.item())
    return None


def glue(name: str, value: Any, display: bool = True, *, digits: int | None = None) -> None:
    """Store ``value`` under ``name`` for ``{glue:text}`name``` in the prose: myst-nb's ``glue`` where myst-nb is
    installed (the book's tools), :func:`record` otherwise (the students' environment). A float is stored rounded
    to ``digits`` decimals, which it must be given (:func:`rounded`)."""
    _store(name, rounded(name, value, digits), display)


try:
    from myst_nb import glue as _store  # the book's tools: the function the book build reads the outputs of
except ImportError:  # the students' environment
    _store = record

__all__ = ["HIDDEN_PREFIX", "glue", "glue_output", "record", "rounded"]
