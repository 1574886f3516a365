"""One home per fact: ``book/`` holds content only, every module is imported by name (no path manipulation), and
the website's build side (``attnsite``) is an installed package whose Sphinx extensions ``_config.yml`` names."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest
import tomllib
import yaml

REPO = Path(__file__).resolve().parents[2]
CONTENT = {".ipynb", ".md", ".bib", ".svg"}  # what book/ may hold
PATH_CALLS = {"spec_from_file_location", "SourceFileLoader", "addsitedir", "run_path"}  # a module loaded by path


def tracked(pattern: str = "") -> list[Path]:
    """The files git tracks or would (under ``pattern``, a folder), or a skip where there is no checkout."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing tracked to read")
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
                            pattern or "."], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    return [REPO / name for name in names if name and (REPO / name).is_file()]


def python_sources() -> dict[str, str]:
    """Every tracked Python module, and every notebook's code cells (magics left out): name -> source."""
    sources = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in tracked() if p.suffix == ".py"}
    for path in (p for p in tracked() if p.suffix == ".ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        lines = [line for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()]
        code = [line for line in lines if not line.lstrip().startswith(("%", "!"))]
        sources[str(path.relative_to(REPO))] = "\n".join(code)
    return sources


def _is_sys_path(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
        and node.value.id == "sys"


def _name(node: ast.AST) -> str:
    return getattr(node, "attr", None) or getattr(node, "id", None) or getattr(node, "name", "")


def path_manipulations(source: str) -> list[str]:
    """What in ``source`` changes where Python finds modules, or loads one from a file path."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if _is_sys_path(node) and not isinstance(node.ctx, ast.Load):
            found.append(f"line {node.lineno}: sys.path assigned")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_sys_path(node.func.value):
            found.append(f"line {node.lineno}: sys.path.{node.func.attr}")
        elif isinstance(node, (ast.Attribute, ast.Name, ast.alias)) and _name(node) in PATH_CALLS:
            found.append(f"line {getattr(node, 'lineno', '?')}: {_name(node)}")
    return sorted(found, key=lambda text: int(text.split()[1].rstrip(":")))


def test_book_holds_content_only():
    files = tracked("book")
    assert any(p.suffix == ".ipynb" for p in files)
    other = [str(p.relative_to(REPO)) for p in files if p.suffix not in CONTENT]
    assert other == [], f"expected only notebooks, Markdown, the bibliography and images in book/, got {other}"


def test_the_finder_sees_what_it_looks_for():
    assert path_manipulations("import sys\nsys.path.insert(0, 'x')\nsys.path = []\nsys.path += ['y']") == [
        "line 2: sys.path.insert", "line 3: sys.path assigned", "line 4: sys.path assigned"]
    assert path_manipulations("from importlib.util import spec_from_file_location") == [
        "line 1: spec_from_file_location"]
    assert path_manipulations("import sys\nprint(sys.path[0])") == []


def test_no_module_is_imported_by_path_manipulation():
    sources = python_sources()
    assert {"attnsite/live_model.py", "tests/repo/test_homes.py", "book/07_causal.ipynb"} <= set(sources)
    found = {name: hits for name, source in sources.items() if name != "tests/repo/test_homes.py"
             and (hits := path_manipulations(source))}
    assert found == {}, f"expected every module imported by its name, got path manipulation in {found}"


def test_sphinx_loads_the_site_s_extensions_by_module_name():
    sphinx = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))["sphinx"]
    assert "local_extensions" not in sphinx, "expected extensions by module name (extra_extensions), not by path"
    ours = [name for name in sphinx["extra_extensions"] if name.startswith("attnsite.")]
    assert len(ours) >= 5
    for name in ours:
        spec = importlib.util.find_spec(name)
        assert spec is not None and Path(spec.origin).is_relative_to(REPO / "attnsite"), name
        assert "def setup(app" in Path(spec.origin).read_text(encoding="utf-8"), f"{name} has no setup(app)"


def test_pytest_adds_no_package_folder_to_the_path():
    pythonpath = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert pythonpath.get("pythonpath", []) == ["."]  # tools/ and tests/ (not packages); attnsite is installed


def test_attnsite_imports_itself_relatively_and_without_fallbacks():
    """Its modules import one another relatively; an import that fails is an error, not a fallback."""
    for path in sorted((REPO / "attnsite").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        absolute = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0
                    and (n.module or "").split(".")[0] == "attnsite"]
        absolute += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                     if a.name.split(".")[0] == "attnsite"]
        fallbacks = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Try)
                     and any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in n.body) for h in n.handlers
                     if isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")]
        assert absolute == [] and fallbacks == [], f"{path.name}: absolute {absolute}, fallbacks at lines {fallbacks}"


# A path of this repository named in a text: under one of its top-level folders, ending in a file's extension or a
# folder's slash, not a pattern or placeholder; a built page (book/x.html) names its chapter or page.
TOP = r"(?:attnlib|attnsite|attncourse|course|tests|tools|book|docs|\.ci|\.github)"
REPO_PATH = re.compile(rf"(?<![\w./~-])({TOP}/[\w./-]*\w/?)")
EXTENSIONS = {".py", ".js", ".css", ".md", ".ipynb", ".yml", ".json", ".txt", ".toml", ".cfg", ".html", ".bib", ".svg"}
TEXTS = {".md", ".py", ".yml", ".yaml", ".toml", ".txt", ".js", ".css", ".cfg", ".ipynb", ".json", ""}
PLACEHOLDER = re.compile(r"NN_|_x\b|<|\*|\.\.\.|\{")


def named_paths(text: str) -> set[str]:
    """The repository paths ``text`` names (``attnlib/views/plots.py``, ``tests/site/``), patterns left out."""
    found = {match.rstrip(".") for match in REPO_PATH.findall(text) if not PLACEHOLDER.search(match)}
    return {name for name in found if name.endswith("/") or Path(name).suffix in EXTENSIONS}


def exists(name: str) -> bool:
    """Whether the named path is in the tree (a built page ``book/x.html``: its source ``book/x.ipynb`` or ``.md``)."""
    if name.endswith(".html"):
        return any((REPO / name).with_suffix(suffix).is_file() for suffix in (".ipynb", ".md"))
    return (REPO / name).exists()


def test_the_path_finder_sees_paths_and_leaves_patterns():
    text = ("see `attnlib/views/plots.py`, tests/site/ and book/NN_name.ipynb, https://x.org/docs/a.py, course/<a>/b.py"
            ", book/03_softmax (a page name), book/intro.html.")
    assert named_paths(text) == {"attnlib/views/plots.py", "tests/site/", "book/intro.html"}
    assert exists("book/intro.html") and exists("tests/site/") and not exists("attnlib/views/nothing.py")


def test_every_repository_path_named_in_a_tracked_text_exists():
    """A comment or a page that names a file that moved sends the reader nowhere (issue #42 found five)."""
    missing = {}
    for path in tracked():
        if path.suffix not in TEXTS or path.is_relative_to(REPO / "course" / "release") or path == Path(__file__):
            continue
        gone = sorted(name for name in named_paths(path.read_text(encoding="utf-8", errors="replace"))
                      if not exists(name))
        if gone:
            missing[str(path.relative_to(REPO))] = gone
    assert missing == {}, f"expected every repository path a text names to exist, got {missing}"
