"""One name, one thing: no two classes in `src/` share a name, module names repeat only where they mean one
thing, docs/architecture.md names every module in the section of its directory, no module is over
`MAX_LINES` lines (one concept per module, which a reader can hold) and no function over `MAX_FUNCTION_LINES`
(ruff's PLR0915 counts statements: one statement can be a 30-argument constructor)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import orchard
from tests.test_layers import FOREIGN, MAX_FUNCTION_LINES, function_lengths

PACKAGE = Path(orchard.__file__).parent
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"
MAX_LINES = 350
# module names that repeat, each for one thing seen from two places
SHARED_NAMES = {
    "base.py": "a package's interface: the VCS adapters', the executors'",
    "candidate.py": "the candidate: its record (lab/records), its collection (lab/judge)",
    "verdict.py": "the verdict: the bench's statistics and records, the lab's records of it",
}


def modules() -> list[str]:
    """Every module of orchard but the packages' `__init__.py`, relative to the package (`lab/loop/lab.py`)."""
    found = [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")]
    return sorted(name for name in found if not name.startswith(FOREIGN) and not name.endswith("__init__.py"))


def longer_than(limit: int) -> dict[str, int]:
    """Every module of orchard, packages' `__init__.py` too, over `limit` lines, with its line count."""
    found = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    return {name: lines for name, lines in sorted(found.items()) if lines > limit and not name.startswith(FOREIGN)}


def documented(text: str) -> set[str]:
    """The modules a code map names: each `name.py` in the section of its directory (`### \\`lab/judge/\\``)."""
    names: set[str] = set()
    directory: str | None = None
    for line in text.splitlines():
        heading = re.match(r"^### `([^`]*)/`", line)
        if heading:
            directory = "" if heading.group(1) == "src/orchard" else heading.group(1) + "/"
        elif line.startswith("## "):
            directory = None
        elif directory is not None:
            names |= {directory + name for name in re.findall(r"`([\w/]+\.py)`", line) if "/" not in name}
    return names


def test_no_two_classes_share_a_name() -> None:
    classes = Counter(node.name for name in modules() for node in ast.walk(ast.parse((PACKAGE / name).read_text()))
                      if isinstance(node, ast.ClassDef))
    assert len(classes) > 100, "the classes of src/ were found"
    assert [name for name, count in classes.items() if count > 1] == []


def test_module_names_repeat_only_for_one_thing() -> None:
    names = Counter(name.rpartition("/")[2] for name in modules())
    assert {name for name, count in names.items() if count > 1} == set(SHARED_NAMES)


def test_no_module_is_over_350_lines() -> None:
    assert len(longer_than(0)) > 100, "the modules of src/ were read"
    assert longer_than(MAX_LINES) == {}, f"split these by concept, each module at most {MAX_LINES} lines"


def test_no_function_is_over_50_lines() -> None:
    lengths = function_lengths(PACKAGE)
    assert len(lengths) > 1000, "the functions of src/ were read"
    assert {name: lines for name, lines in lengths.items() if lines > MAX_FUNCTION_LINES} == {}, (
        f"split these into parts a reader can hold, each at most {MAX_FUNCTION_LINES} lines")


def test_a_function_is_counted_from_its_def_to_its_last_line(tmp_path: Path) -> None:
    """The count itself: decorators left out, the docstring and nested functions in, methods and nested
    functions named by what holds them, the foreign project's code left out."""
    (tmp_path / "m.py").write_text('@cache\n@other\ndef f():\n    """Why."""\n    def g():\n        return 1\n'
                                   '    return g()\nclass C:\n    async def h(self):\n        pass\n')
    (tmp_path / "demo" / "target").mkdir(parents=True)
    (tmp_path / "demo" / "target" / "x.py").write_text("def far():\n    pass\n")
    assert function_lengths(tmp_path) == {"m.py:f": 5, "m.py:f.g": 2, "m.py:C.h": 2}


def test_the_code_map_names_every_module() -> None:
    assert len(modules()) > 100
    assert sorted(set(modules()) - documented(ARCHITECTURE.read_text())) == []


def test_the_code_map_is_read_by_section() -> None:
    """The check itself: a name counts for the section it is in, and only there."""
    text = "### `src/orchard/`\n- `cli.py`: x\n### `lab/judge/`\n- `ladder.py`, `lab/x.py`\n## Other\n- `stop.py`\n"
    assert documented(text) == {"cli.py", "lab/judge/ladder.py"}
