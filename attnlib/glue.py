"""Numbers computed in a chapter, put into its prose: ``glue(name, value)`` and ``{glue:text}`name:.3f```.

On the website, myst-nb's ``glue`` stores a value in the cell's outputs and the book build, which has just
executed the chapter, puts its text wherever the prose says ``{glue:text}`name```. The students' environment
(``requirements.txt``) has no myst-nb, so the chapters import ``glue`` from here: myst-nb's own function where
myst-nb is installed, otherwise :func:`record`, which stores exactly the output myst-nb stores
(``tests/lib/test_glue.py`` checks that they are identical).

The output is an IPython display: the value's formatted representations (``text/plain``, and
``text/html``/``image/png``... where the value has them), each MIME type prefixed with
``application/papermill.record/`` when ``display=False`` (Jupyter then shows nothing), and the metadata
``{"scrapbook": {"name": name, "mime_prefix": prefix}}`` by which the book build and the student release
(``attncourse/markup.py``) find it.

A one-element float tensor or array is glued as a Python float, so that a role's format (``:.3f``) applies to
it; the role, not the stored value, says how many digits the page shows.
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


def as_number(value: Any) -> Any:
    """``value`` as ``glue`` stores it: a one-element float tensor or array (or a NumPy float) as a Python float,
    anything else unchanged."""
    if isinstance(value, (bool, numbers.Integral)):
        return value
    if isinstance(value, numbers.Real):
        return float(value)
    dtype = getattr(value, "dtype", None)
    if dtype is not None and callable(getattr(value, "item", None)):
        count = value.numel() if callable(getattr(value, "numel", None)) else getattr(value, "size", None)
        is_float = getattr(dtype, "is_floating_point", None)
        floating = is_float if isinstance(is_float, bool) else getattr(dtype, "kind", "") == "f"
        if count == 1 and floating:
            return float(value.item())
    return value


def glue(name: str, value: Any, display: bool = True) -> None:
    """Store ``value`` under ``name`` for ``{glue:text}`name``` in the prose: myst-nb's ``glue`` where myst-nb is
    installed (the book's tools), :func:`record` otherwise (the students' environment)."""
    _store(name, as_number(value), display)


try:
    from myst_nb import glue as _store  # the book's tools: the function the book build reads the outputs of
except ImportError:  # the students' environment
    _store = record

__all__ = ["HIDDEN_PREFIX", "as_number", "glue", "glue_output", "record"]
