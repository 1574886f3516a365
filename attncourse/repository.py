"""One setting names where the book lives: ``repository: url:`` in ``_config.yml``.

From it come the launch buttons (Jupyter Book reads it), the published website's address (GitHub Pages:
``https://github.com/<owner>/<name>`` is published at ``https://<owner>.github.io/<name>/``; an
``html: baseurl:`` in ``_config.yml`` names another host), and the copies of the URL that a reader runs,
which must sit in the files themselves (a notebook on Colab has no ``_config.yml``): every chapter's setup
cell, whose whole text is :func:`setup_source` of the URL (its one home; CONTRIBUTING.md points here
instead of copying it), and the instructors' ``git clone``. ``python -m attncourse publish`` (``make student``)
writes them from ``_config.yml`` (:func:`stamp`); the tests check that every chapter's setup cell is
:func:`setup_source` and every copy of the URL is ``_config.yml``'s.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "_config.yml"
GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$")
# a copy of the repository URL: in the install line (``@ git+URL``) or a clone command (``git clone URL``)
COPY = re.compile(r"(?P<lead>git\+|git clone )(?P<url>https://[^\s\"'@\\]+)")
STAMPED_FILES = ("book/instructors.md",)  # besides the book's notebooks, whose setup cells stamp writes whole
SETUP_TAG = "remove-cell"  # the setup cell is hidden on the website
SETUP_COMMENT = ("# Setup for Colab and other fresh environments: installs attnlib when it is missing, "
                 "else does nothing.")


def config(path: Path = CONFIG) -> dict:
    """``_config.yml`` as a dict."""
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def repository_url(path: Path = CONFIG) -> str:
    """The repository URL, ``repository: url:``, without a trailing slash."""
    url = (config(path).get("repository") or {}).get("url")
    if not url:
        raise KeyError(f"expected repository: url: in {path}, got none")
    return url.rstrip("/")


def site_url(path: Path = CONFIG) -> str:
    """The published website's address, ending in ``/``: ``html: baseurl:``, else GitHub Pages'."""
    base = (config(path).get("html") or {}).get("baseurl")
    if base:
        return base.rstrip("/") + "/"
    url = repository_url(path)
    match = GITHUB.match(url)
    if not match:
        raise ValueError(f"expected a https://github.com/<owner>/<name> repository URL in {path} (or set "
                         f"html: baseurl: to the site's address), got {url!r}")
    return f"https://{match['owner'].lower()}.github.io/{match['name']}/"


def page_url(stem: str, path: Path = CONFIG) -> str:
    """A chapter's page on the published website (the chapters sit in ``book/``)."""
    return f"{site_url(path)}book/{stem}.html"


def copies(text: str) -> list[str]:
    """Every copy of a repository URL in ``text`` (install lines and clone commands)."""
    return [m["url"] for m in COPY.finditer(text)]


def stamped(text: str, url: str) -> str:
    """``text`` with every copy of a repository URL replaced by ``url``."""
    return COPY.sub(lambda m: m["lead"] + url, text)


def setup_source(url: str) -> str:
    """The setup cell every chapter starts with: installs attnlib from the repository at ``url`` (with the extras
    the chapters import) where it is missing, on Colab or any fresh environment, and does nothing elsewhere."""
    return (f"{SETUP_COMMENT}\n"
            "import importlib.util\n"
            "import subprocess\n"
            "import sys\n"
            "\n"
            'if importlib.util.find_spec("attnlib") is None:\n'
            '    subprocess.run([sys.executable, "-m", "pip", "install", "-q",\n'
            f'                    "attnlib[views,models] @ git+{url}"],\n'
            "                   check=True)")


def setup_cell(nb):
    """The notebook's setup cell: its first code cell, tagged ``SETUP_TAG``, empty (a new chapter's, which
    :func:`stamp` fills) or starting with ``SETUP_COMMENT``; an error when the first code cell is anything else."""
    cell = next((c for c in nb.cells if c.cell_type == "code"), None)
    if cell is None or SETUP_TAG not in cell.metadata.get("tags", []) or not (
            not cell.source.strip() or cell.source.startswith(SETUP_COMMENT)):
        got = "no code cell" if cell is None else f"{cell.source[:80]!r} with tags {cell.metadata.get('tags', [])}"
        raise ValueError(f"expected the first code cell to be the setup cell (tag {SETUP_TAG!r}, empty or starting "
                         f"with {SETUP_COMMENT!r}), got {got}")
    return cell


def _stamp_notebook(path: Path, url: str) -> bool:
    nb = nbformat.read(path, as_version=4)
    cell = setup_cell(nb)
    if cell.source == setup_source(url):
        return False
    cell.source = setup_source(url)
    nbformat.write(nb, path)
    return True


def stamp(root: Path = ROOT) -> list[Path]:
    """Write every chapter's setup cell (:func:`setup_source`) and the copies of the URL in ``STAMPED_FILES``
    from ``_config.yml``'s repository URL; the files that changed."""
    url = repository_url(Path(root) / "_config.yml")
    changed = [p for p in sorted((Path(root) / "book").glob("*.ipynb")) if _stamp_notebook(p, url)]
    for name in STAMPED_FILES:
        path = Path(root) / name
        text = path.read_text(encoding="utf-8")
        if stamped(text, url) != text:
            path.write_text(stamped(text, url), encoding="utf-8")
            changed.append(path)
    return changed
