"""The theme's icons without 1.5 MB of JavaScript: Font Awesome with only the icons the site uses.

pydata-sphinx-theme loads ``_static/scripts/fontawesome.js`` on every page: Font Awesome Free 6.5.2
with *every* free icon (1.49 MB, 542 kB gzipped; the largest file of most pages). The site shows
about twenty of them. After the build, ``write_subset`` replaces that file with Font Awesome's own
core (``js/fontawesome.min.js``, npm ``@fortawesome/fontawesome-free``, the theme's version) plus
its icon packs cut down to the icons named anywhere in the built HTML or the theme's JavaScript
(``fa-bars``, ``"fa-solid fa-xmark"``, ...). Same library, same API, same rendering; ~20 kB.
The browser tests check that every icon on every page is drawn.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

PACKS = ("solid", "regular", "brands")  # Font Awesome Free's three styles
THEME_FILE = "_static/scripts/fontawesome.js"
_ICON_CLASS = re.compile(r"\bfa-([a-z0-9]+(?:-[a-z0-9]+)*)")
_ICONS_START = "  var icons = {\n"
_ICONS_END = "\n  };\n"


def used_names(outdir: Path) -> set[str]:
    """Every ``fa-<name>`` in the built pages and in the site's own JavaScript (not the vendored libraries)."""
    files = [*outdir.rglob("*.html"), *(outdir / "_static").rglob("*.js")]
    skip = {outdir / THEME_FILE}
    names: set[str] = set()
    for path in files:
        if path in skip or "_vendor" in path.parts or "vendor" in path.parts:
            continue
        names.update(_ICON_CLASS.findall(path.read_text(encoding="utf-8", errors="replace")))
    return names


def _split_pack(source: str, pack: str) -> tuple[str, dict, str]:
    start = source.find(_ICONS_START)
    end = source.find(_ICONS_END, start)
    if start < 0 or end < 0:
        raise ValueError(f"expected Font Awesome's {pack}.js with a 'var icons = {{...}};' block, got none")
    body = source[start + len(_ICONS_START) - 2:end + 4]  # "{\n ... \n  }"
    return source[:start], json.loads(body), source[end + len(_ICONS_END) - 1:]


def _wanted(name: str, icon: list, names: set[str]) -> bool:
    aliases = [a for a in icon[2] if isinstance(a, str)]  # icon = [width, height, aliases, unicode, path]
    return name in names or any(a in names for a in aliases)


def subset_pack(source: str, names: set[str], pack: str = "solid") -> tuple[str, int]:
    """Font Awesome pack source (e.g. ``js/solid.js``) keeping only icons in ``names``; (source, count)."""
    head, icons, tail = _split_pack(source, pack)
    kept = {name: icon for name, icon in icons.items() if _wanted(name, icon, names)}
    entries = ",\n".join(f"    {json.dumps(name)}: {json.dumps(icon, separators=(',', ':'))}"
                          for name, icon in kept.items())  # the pack's own layout, one icon a line
    return f"{head}{_ICONS_START}{entries}{_ICONS_END}{tail[1:]}", len(kept)


def write_subset(outdir: Path, fontawesome_free: Path) -> int:
    """Replace the theme's all-icons ``fontawesome.js`` in ``outdir``; returns how many icons it keeps."""
    target = outdir / THEME_FILE
    if not target.is_file():
        return 0
    names = used_names(outdir)
    parts, kept = [], 0
    for pack in PACKS:
        source = (fontawesome_free / "js" / f"{pack}.js").read_text(encoding="utf-8")
        text, count = subset_pack(source, names, pack)
        parts.append(text)
        kept += count
    parts.append((fontawesome_free / "js" / "fontawesome.min.js").read_text(encoding="utf-8"))
    target.write_text("\n".join(parts), encoding="utf-8")
    return kept
