"""What each reader installs (issue #47): a student's ``pip install .`` (Colab's setup cell, Binder, JupyterHub) gives
attnlib alone; the course kit (attncourse) and the website's build (attnsite) are the project in course/pyproject.toml,
installed from the checkout; and the website's build imports no grading stack: what it shares with the kit (the
exercise cells' format) is one module that needs neither nbgrader nor Sphinx."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import tomllib

from attncourse import exercise_cells

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_students_install_holds_attnlib_alone(tmp_path):
    """``pip wheel . --no-deps`` on the root project; pip builds in the source folder (its build/), so on a copy of
    what the root holds for Python: attnlib, attnsite and attncourse beside it, as in the checkout."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("attnlib", "attnsite", "attncourse"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "--wheel-dir", str(tmp_path / "wheel"), str(source)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"attnlib"}, f"expected attnlib alone in the students' wheel, got {sorted(top)}"
    shipped = {name for name in names if name.startswith("attnlib/views/js/")}
    expected = {f"attnlib/views/js/{p.relative_to(ROOT / 'attnlib' / 'views' / 'js')}"
                for p in (ROOT / "attnlib" / "views" / "js").rglob("*") if p.is_file()}
    assert expected and shipped == expected, "the views' JavaScript (package data) must ship with attnlib"


def test_the_kit_and_the_site_build_are_a_project_of_their_own():
    """course/pyproject.toml installs attncourse and attnsite where they are; this environment has them from here."""
    project = tomllib.loads((ROOT / "course" / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    assert sorted(setuptools["packages"]) == ["attncourse", "attnsite"]
    for package in setuptools["packages"]:
        assert (ROOT / "course" / setuptools["package-dir"][package]).resolve() == ROOT / package
        assert Path(importlib.util.find_spec(package).origin).is_relative_to(ROOT / package), package
    root = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert root["tool"]["setuptools"]["packages"]["find"]["include"] == ["attnlib*"]


def modules_imported(code: str) -> list[str]:
    """The top-level names of the modules a fresh Python has imported after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_site_build_imports_no_grading_stack():
    """Every module of attnsite imported (as Sphinx imports the extensions, and ``make pdf`` the printer): no
    nbgrader; the exercise cells' format it shares with the kit imports the standard library alone."""
    every = ("import importlib, pkgutil, attnsite\n"
             "for found in pkgutil.iter_modules(attnsite.__path__):\n"
             "    importlib.import_module('attnsite.' + found.name)")
    loaded = modules_imported(every)
    assert "sphinx" in loaded and "attnsite" in loaded, "the probe imported nothing of the site"
    assert "nbgrader" not in loaded
    alone = set(modules_imported(f"import {exercise_cells.__name__}")) - set(modules_imported("pass"))
    assert alone - set(sys.stdlib_module_names) == {"attncourse"}  # (the start-up's own .pth hooks left out)
