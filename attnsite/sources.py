"""What a cached build product depends on, derived from the code instead of listed by hand.

The build caches what is slow to make (chapter 9's trained model, chapter 6's ONNX export, BertViz's view
code for the page) under a key of its inputs. ``imported_modules`` finds the code part of those inputs: a
module and every module of its package that it imports, directly or through another, at the top of a file
or inside a function. A hand list goes stale when a module starts importing a new one; this does not.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from importlib.metadata import version
from pathlib import Path


def _origin(name: str) -> Path | None:
    """The source file of module ``name``, or None when it is no module (a name inside one)."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _imported_names(path: Path, module: str) -> set[str]:
    """Every module name an import statement of ``path`` (the file of ``module``) may name, relative ones resolved.

    ``from a.b import c`` names ``a.b`` and, in case ``c`` is a submodule, ``a.b.c``.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def imported_modules(module: str, package: str | None = None) -> dict[str, Path]:
    """``module`` and every module of ``package`` (default: ``module``'s top-level package) it imports, directly
    or through others, with the packages that contain them (their ``__init__`` runs too): name -> source file."""
    package = package or module.partition(".")[0]
    found: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in found or not (name == package or name.startswith(package + ".")):
            continue
        path = _origin(name)
        if path is None:
            continue
        found[name] = path
        parents = [name.rsplit(".", depth)[0] for depth in range(1, name.count(".") + 1)]
        todo += [*parents, *_imported_names(path, name)]
    return dict(sorted(found.items()))


def digest(files: list[Path], packages: tuple[str, ...] = (), length: int = 16) -> str:
    """A hex key of the files' bytes (in the given order) and the installed versions of ``packages``."""
    parts = [Path(file).read_bytes() for file in files]
    parts += [f"{name}=={version(name)}".encode() for name in packages]
    return hashlib.sha256(b"\n".join(parts)).hexdigest()[:length]
