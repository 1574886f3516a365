"""The browser libraries the website serves itself, from npm: which files, and where in the built site.

Every JavaScript library a page needs is installed from npm (``package.json``, exact versions, by
``npm ci``) into the repository's ``node_modules/`` and served by the site itself from
``_static/_vendor/``: nothing is fetched from a CDN. ``SITE_FILES`` lists what ``vendor_assets.py``
copies into the built site; ``live_model.py`` adds chapter 6's runtime. This is build tooling: the
notebooks' views get d3 and jQuery from the copies attnlib ships (``attnlib.views.html``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

# under the site's _static/ because Sphinx resolves `nb_ipywidgets_js` there
# (JB1 only auto-includes .js/.css of a *source* _static/ folder, so this output folder is safe)
VENDOR_DIR = "_static/_vendor"

# name -> (file under node_modules, URL under the site root)
LIBRARY_FILES = {
    "require": ("requirejs/require.js", f"{VENDOR_DIR}/require.js"),
    "d3": ("d3/dist/d3.min.js", f"{VENDOR_DIR}/d3.min.js"),
    "jquery": ("jquery/dist/jquery.min.js", f"{VENDOR_DIR}/jquery.min.js"),
}
LIBRARIES = tuple(LIBRARY_FILES)

# _config.yml names it relative to _static/: nb_ipywidgets_js
WIDGETS_JS = f"{VENDOR_DIR}/html-manager/embed.js"

# site path -> path under node_modules; a path ending in "/" copies that folder.
SITE_FILES = {
    **{url: src for src, url in LIBRARY_FILES.values()},
    # WIDGETS_JS, and the icon fonts it loads from its own folder when a widget shows an icon
    f"{VENDOR_DIR}/html-manager/": "@jupyter-widgets/html-manager/dist/",
    # MathJax's TeX fonts: the build typesets the formulas (typeset_math.py), the pages draw them in these
    f"{VENDOR_DIR}/mathjax/output/chtml/fonts/woff-v2/": "mathjax/es5/output/chtml/fonts/woff-v2/",
}
# what a copied folder may hold (the html-manager's dist also has 3.6 MB bundles the site does not use)
SITE_SUFFIXES = (".js", ".json", ".woff", ".woff2", ".ttf", ".eot", ".svg", ".css", ".txt")
SITE_SKIP = ("embed-amd.js", "libembed-amd.js")


REPO = Path(__file__).resolve().parents[1]  # the repository (attnsite is installed editable: `pip install -e .`)
STATIC = Path(__file__).resolve().parent / "static"  # the site's own CSS and JavaScript (package data)
STATIC_DIR = "attnlib"  # where the output holds them, under its _static/


def copy_static(outdir: str | Path, names: Iterable[str]) -> None:
    """Copy the site's own files ``names`` (from ``STATIC``) into ``outdir/_static/attnlib/``."""
    target = Path(outdir) / "_static" / STATIC_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(STATIC / name, target / name)


def node_modules() -> Path:
    """The ``node_modules`` folder: ``$ATTNLIB_NODE_MODULES``, else the repository's (``npm ci``; ``make setup``)."""
    override = os.environ.get("ATTNLIB_NODE_MODULES")
    folder = Path(override) if override else REPO / "node_modules"
    if override and not folder.is_dir():
        raise FileNotFoundError(f"expected ATTNLIB_NODE_MODULES to name a folder, got {folder}")
    if not (folder / "d3").is_dir():
        raise FileNotFoundError(f"expected the npm packages in {folder} (run `npm ci` at the repository root; "
                                f"`make setup` runs it), got no such folder")
    return folder


def _check_name(name: str) -> None:
    if name not in LIBRARY_FILES:
        raise ValueError(f"expected a library name in {LIBRARIES}, got {name!r}")


def library_path(name: str) -> Path:
    """The file of library ``name`` ('require', 'd3' or 'jquery') inside ``node_modules``."""
    _check_name(name)
    path = node_modules() / LIBRARY_FILES[name][0]
    if not path.is_file():
        raise FileNotFoundError(f"expected {path} from npm (run `npm ci`), got no such file")
    return path


def site_url(name: str) -> str:
    """URL of library ``name`` relative to the site root, e.g. ``'_static/_vendor/d3.min.js'``.

    A page in ``book/`` reaches it as ``'../' + site_url(name)``; in the browser the prefix is
    ``document.documentElement.dataset.content_root`` (set by Sphinx on every page).
    """
    _check_name(name)
    return LIBRARY_FILES[name][1]


def _folder_files(source: Path, site_dir: str):
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.name.endswith(SITE_SUFFIXES) and path.name not in SITE_SKIP:
            yield path, site_dir + path.relative_to(source).as_posix()


def site_files() -> list[tuple[Path, str]]:
    """Every (file in node_modules, site path) pair the built site serves, folders expanded."""
    root, pairs = node_modules(), []
    for site_path, source in SITE_FILES.items():
        if not (root / source).exists():
            raise FileNotFoundError(f"expected {root / source} from npm (run `npm ci`), got no such path")
        if site_path.endswith("/"):
            pairs.extend(_folder_files(root / source, site_path))
        else:
            pairs.append((root / source, site_path))
    return pairs
