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
"""

from __future__ import annotations

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


try:
    from myst_nb import glue  # the book's tools: the function the book build reads the outputs of
except ImportError:  # the students' environment
    glue = record

__all__ = ["HIDDEN_PREFIX", "glue", "glue_output", "record"]
