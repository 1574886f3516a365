"""attnlib holds what chapters and students import: no build tooling, no subprocess, dependencies students need.

The website's build (ONNX export, Sphinx extensions, npm) lives in ``attnsite``; these tests keep it there.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import shutil
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "attnlib"
BUILD_ONLY = ("onnx", "onnxscript", "onnxruntime", "sphinx", "docutils")  # what the site's build needs
NO_PROCESSES = ("subprocess", "multiprocessing", "pty")
PROCESS_CALLS = {"system", "popen", "spawnl", "spawnv", "execv", "execl", "fork"}  # os.<name>


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _optional(node: ast.AST, parents: dict) -> bool:
    """Whether ``node`` sits in a ``try`` whose handlers catch ImportError (an optional import)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                for h in node.handlers):
            return True
    return False


def imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level module name, optional?) for every absolute import in ``path``, nested ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], _optional(node, parents)) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], _optional(node, parents)))
    return found


def test_no_module_imports_build_tooling_or_starts_processes():
    bad = {}
    for path in modules():
        names = {name for name, _ in imports(path)} & {*BUILD_ONLY, *NO_PROCESSES}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = {f"os.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in PROCESS_CALLS
                 and isinstance(n.value, ast.Name) and n.value.id == "os"}
        if names or calls:
            bad[str(path.relative_to(REPO))] = sorted(names | calls)
    assert len(modules()) > 20  # the walk did read the package
    assert bad == {}, f"expected attnlib free of build tooling and processes, got {bad}"


@pytest.mark.slow  # seconds: make check leaves it to make test
def test_importing_every_module_loads_no_build_tooling():
    """Every attnlib module imported in a fresh interpreter: no ONNX, Sphinx or docutils module comes with it."""
    program = f"""
import importlib, json, pkgutil, sys
import attnlib
names = [m.name for m in pkgutil.walk_packages(attnlib.__path__, "attnlib.")]
for name in names:
    importlib.import_module(name)
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({list(BUILD_ONLY)!r}))
print(json.dumps({{"modules": names, "loaded": loaded}}))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300,
                          cwd=REPO)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"attnlib.attention", "attnlib.views.bertviz", "attnlib.views.neuron", "attnlib.bench"} \
        <= set(result["modules"])
    assert result["loaded"] == [], f"expected no build tooling imported by attnlib, got {result['loaded']}"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: list[str]) -> set[str]:
    return {_normal(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in requirements}


@functools.cache
def _all_distributions() -> dict[str, list[str]]:
    return packages_distributions()


def _distributions(module: str) -> set[str]:
    return {_normal(d) for d in _all_distributions().get(module, [])}


def test_dependencies_are_what_attnlib_imports():
    """pyproject: ``dependencies`` = what every import of attnlib needs; ``views``/``models``/``kernels`` = what those
    modules import; the build's packages (onnx...), which attnlib never imports, are not attnlib's at all."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core, extras = _names(project["dependencies"]), {k: _names(v) for k, v in project["optional-dependencies"].items()}
    required, optional = set(), set()
    for path in modules():
        for name, is_optional in imports(path):
            if name != "attnlib" and name not in sys.stdlib_module_names:
                (optional if is_optional else required).add(name)
    core_imports = set()  # what the modules outside views/ and models.py import when they are imported
    for path in modules():
        if "views" not in path.parts and path.name != "models.py":
            body = ast.parse(path.read_text(encoding="utf-8")).body
            core_imports |= {alias.name.split(".")[0] for node in body if isinstance(node, ast.Import)
                             for alias in node.names}
            core_imports |= {node.module.split(".")[0] for node in body
                             if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module}
    assert core == {d for m in core_imports - {"attnlib"} for d in _distributions(m)} == {"numpy", "torch"}
    declared = core | extras["views"] | extras["models"] | extras["kernels"]
    # IPython comes with ipywidgets (its dependency) and with every kernel (glue.py imports it only inside one);
    # everything else attnlib imports is declared by name
    undeclared = {m for m in required if not _distributions(m) & declared} - {"IPython"}
    assert undeclared == set(), f"expected every import of attnlib in dependencies or an extra, got {undeclared}"
    unused = {d for d in declared if not any(d in _distributions(m) for m in required | optional)}
    assert unused == set(), f"expected every declared dependency imported by attnlib, got {unused} unused"
    assert set(extras) == {"views", "models", "kernels"}  # the build's (onnx...) are the kit's: course/pyproject.toml
    assert not {d for m in required | optional for d in _distributions(m)} & {"onnx", "onnxscript", "onnxruntime"}
    assert "tqdm" not in declared and "tqdm" in {m for m in optional}  # bench's bar: shown when installed


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node (installed with npm, see .ci/run)")
def test_every_shipped_javascript_file_parses():
    """``node --check`` on every .js that attnlib ships (its own and the vendored d3/jQuery)."""
    files = sorted((PACKAGE / "views" / "js").rglob("*.js"))
    assert {f.name for f in files} >= {"access.js", "runner.js", "neuron_added.js", "d3.min.js", "jquery.min.js"}
    for path in files:
        done = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"expected {path.name} to be valid JavaScript, got {done.stderr[-500:]}"


def test_the_version_is_written_once():
    """pyproject reads the version from attnlib.__version__ (setuptools' dynamic attr), so the two cannot drift."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "attnlib.__version__"}
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+"$', (REPO / "attnlib" / "__init__.py").read_text(), re.M)
