"""Sphinx extension: the chapters' execution cache holds only what the current attnlib computes.

The build executes the chapters (``_config.yml``: ``execute_notebooks: cache``). jupyter-cache keys each executed
notebook by its code cells alone, so after a change to attnlib, or to a pinned package, a cached chapter would
show what the old code computed. Every chapter imports attnlib, so this extension keys the whole cache by
attnlib's files and the installed versions of what computes the chapters' numbers and figures: when that key
changes, the cache is emptied before anything is read, and every chapter is executed again. A change to one
chapter's code re-executes that chapter alone (jupyter-cache's own key).

Registered in ``_config.yml`` under ``sphinx: extra_extensions``.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

import attnlib
from .sources import digest

# what computes the chapters' outputs besides attnlib (their versions are part of the key)
PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets", "transformers", "bertviz", "myst-nb")
KEY_FILE = "attnlib.key"
LOGGER = logging.getLogger(__name__)


def cache_key() -> str:
    """A hex key of attnlib's files (every file of the installed package) and the versions of ``PACKAGES``."""
    root = Path(attnlib.__file__).parent
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return digest(files, PACKAGES)


def empty_stale_cache(app: Sphinx, config) -> None:
    """``config-inited``: empty the execution cache when the key it was filled under is not the current one."""
    if config.nb_execution_mode != "cache":
        return
    from jupyter_cache import get_cache  # noqa: PLC0415 - myst-nb's dependency, needed only for this mode

    folder = Path(config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache")
    key, stamp = cache_key(), folder / KEY_FILE
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        return
    if folder.is_dir():
        LOGGER.info(f"attnlib or a pinned package changed since {folder} was filled: every chapter is re-executed")
        get_cache(str(folder)).clear_cache()
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    """Register the check, before myst-nb reads its configuration."""
    app.connect("config-inited", empty_stale_cache, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
