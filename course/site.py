"""One setting names where the book lives: ``repository: url:`` in ``_config.yml``.

From it come the launch buttons (Jupyter Book reads it), the published website's address (GitHub Pages:
``https://github.com/<owner>/<name>`` is published at ``https://<owner>.github.io/<name>/``; an
``html: baseurl:`` in ``_config.yml`` names another host), and the copies of the URL that a reader runs:
the install line in every chapter's setup cell, the instructors' ``git clone`` and CONTRIBUTING's setup
cell. ``python -m course publish`` (``make student``) stamps the URL into those copies (:func:`stamp`);
``tests/course/test_release.py`` checks that they agree with ``_config.yml``.
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
STAMPED_FILES = ("book/instructors.md", "CONTRIBUTING.md")  # besides the book's notebooks


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


def _stamp_notebook(path: Path, url: str) -> bool:
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        new = stamped(cell.source, url)
        changed |= new != cell.source
        cell.source = new
    if changed:
        nbformat.write(nb, path)
    return changed


def stamp(root: Path = ROOT) -> list[Path]:
    """Write ``_config.yml``'s repository URL into every copy of it; the files that changed."""
    url = repository_url(Path(root) / "_config.yml")
    changed = [p for p in sorted((Path(root) / "book").glob("*.ipynb")) if _stamp_notebook(p, url)]
    for name in STAMPED_FILES:
        path = Path(root) / name
        text = path.read_text(encoding="utf-8")
        if stamped(text, url) != text:
            path.write_text(stamped(text, url), encoding="utf-8")
            changed.append(path)
    return changed
