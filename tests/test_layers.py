"""The package layers, read from the source: bench never imports lab, the lab measures only through verdicts.py.

Imports are parsed with `ast`, so an import inside a function or under
`TYPE_CHECKING` counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import orchard

SRC = Path(orchard.__file__).parent
SHARED = ("confine.py", "errors.py", "jsonlines.py", "process.py", "tomlfile.py")  # used by bench and lab alike


def _package(path: Path) -> str:
    """The package a module file belongs to (a package's `__init__.py` belongs to itself)."""
    return ".".join(path.relative_to(SRC.parent).parent.parts)


def imported(source: str, package: str) -> list[tuple[int, str]]:
    """Every module `source` (a module of `package`) imports, with its line; `from orchard import bench` is
    `orchard.bench`, and relative imports are resolved."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def importers(files: list[Path], package: str) -> list[str]:
    """`file:line module` for each import of `package` (or anything in it) among `files`."""
    return [f"{path.relative_to(SRC)}:{line} {name}" for path in files
            for line, name in imported(path.read_text(), _package(path))
            if name == package or name.startswith(package + ".")]


def test_bench_never_imports_lab() -> None:
    files = sorted((SRC / "bench").rglob("*.py"))
    assert len(files) > 20, "the bench's modules were found"
    assert importers(files, "orchard.lab") == []


def test_verdicts_is_the_only_lab_module_that_imports_bench() -> None:
    files = sorted((SRC / "lab").rglob("*.py"))
    assert importers([SRC / "lab" / "verdicts.py"], "orchard.bench"), "verdicts.py measures through the bench"
    assert importers([path for path in files if path != SRC / "lab" / "verdicts.py"], "orchard.bench") == []


def test_the_shared_modules_import_neither_package() -> None:
    files = [SRC / name for name in SHARED]
    assert importers(files, "orchard.bench") == importers(files, "orchard.lab") == []


def test_every_way_of_importing_bench_is_seen() -> None:
    """The check itself: absolute, from-the-package, relative and deferred imports are all found."""
    source = ("import orchard.bench.lock\nfrom orchard import bench\nfrom ...bench.rows import step_row\n"
              "from .. import verdicts\ndef later():\n    from orchard.bench import stats\n")
    names = {name for _, name in imported(source, "orchard.lab.vcs")}
    assert {"orchard.bench.lock", "orchard.bench", "orchard.bench.rows", "orchard.bench.stats",
            "orchard.lab.verdicts"} <= names
