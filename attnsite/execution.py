"""The chapters as this checkout computes them: the build's execution cache, kept in step with attnlib.

The build executes the chapters (``_config.yml``: ``execute_notebooks: cache``, ``cache: _build/.jupyter_cache``).
jupyter-cache keys each executed notebook by its code cells alone, so after a change to attnlib, or to a pinned
package, a cached chapter would show what the old code computed. Every chapter imports attnlib, so the whole cache
is keyed by attnlib's files and the installed versions of what computes the chapters' numbers and figures: when
that key changes, the cache is emptied before anything is read, and every chapter is executed again. A change to
one chapter's code re-executes that chapter alone (jupyter-cache's own key).

- As a Sphinx extension (``_config.yml``: ``sphinx: extra_extensions``) it checks the key before myst-nb reads
  the cache.
- ``executed(path)`` gives a chapter with its outputs to the tools that need its computed values outside the
  build (``make student`` puts the glued numbers into the releases' prose): the build's own execution when the
  cache has the chapter's current code, else it executes the chapter now and caches it for the next build.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import yaml

import attnlib

from .sources import digest

REPO = Path(__file__).resolve().parents[1]
# what computes the chapters' outputs besides attnlib (their versions are part of the key)
PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets", "transformers", "bertviz", "myst-nb")
KEY_FILE = "attnlib.key"


def cache_key() -> str:
    """A hex key of attnlib's files (every file of the installed package) and the versions of ``PACKAGES``."""
    root = Path(attnlib.__file__).parent
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return digest(files, PACKAGES)


def cache_folder() -> Path:
    """The build's execution cache, as ``_config.yml`` names it (relative to the repository's root)."""
    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    return REPO / config["execute"]["cache"]


def fresh_cache(folder: Path):
    """The jupyter-cache in ``folder``, emptied first when it was filled under another key than ``cache_key()``."""
    from jupyter_cache import get_cache  # noqa: PLC0415 - myst-nb's dependency, needed only here

    key, stamp = cache_key(), folder / KEY_FILE
    if folder.is_dir() and not (stamp.is_file() and stamp.read_text(encoding="utf-8") == key):
        get_cache(str(folder)).clear_cache()
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key, encoding="utf-8")
    return get_cache(str(folder))


def executed(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """The chapter at ``path`` with the outputs of its current code (see the module docstring); a failing cell
    raises with its traceback."""
    from jupyter_cache.base import CacheBundleIn  # noqa: PLC0415
    from jupyter_cache.executors.utils import single_nb_execution  # noqa: PLC0415

    cache, nb = fresh_cache(cache_folder()), nbformat.read(path, as_version=4)
    try:
        return cache.merge_match_into_notebook(nb)[1]
    except KeyError:  # not executed since its code last changed
        pass
    result = single_nb_execution(nb, cwd=str(Path(path).parent), timeout=timeout, allow_errors=False)
    if result.err is not None:
        raise RuntimeError(f"executing {path} failed:\n{result.exc_string}") from result.err
    cache.cache_notebook_bundle(CacheBundleIn(nb, str(Path(path).resolve()), data={"execution_seconds": result.time}),
                                check_validity=False, overwrite=True)
    return nb


def empty_stale_cache(app, config) -> None:
    """``config-inited``: in ``cache`` mode, the cache holds only what the current attnlib computed; the key is also
    a config value of Sphinx's environment, so a new key makes Sphinx read every page again (and execute them)."""
    if config.nb_execution_mode == "cache":
        fresh_cache(Path(config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache"))
        config.attnlib_execution_key = cache_key()


def setup(app) -> dict:
    """Register the check, before myst-nb reads its configuration."""
    app.add_config_value("attnlib_execution_key", "", "env")
    app.connect("config-inited", empty_stale_cache, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
