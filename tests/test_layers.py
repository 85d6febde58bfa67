"""The import graph of all of `src/`, read from the source: no cycle, and every import points down.

Imports are parsed with `ast`, so an import inside a function or under
`TYPE_CHECKING` counts as much as one at the top of a module. The lab is
built in floors (`FLOORS`, bottom first): a module imports only its own
floor and the floors below it; the records import nothing of the lab but
other records; the bench never imports the lab, and the lab imports only
the bench's public surface (`orchard.bench`), in three modules (`BENCH_DOORS`):
the judge's measuring module runs it, the records take its verdict records,
and the worker's bench view withholds its held-out inputs. Inside the workers'
floor, its folders are floors too (`WORKER_FOLDERS`, bottom first), and so are
the bench's packages (`BENCH_FOLDERS`).

`python tests/test_layers.py [SRC]` prints the lab's counts for any tree, the
workers' folders and the bench's (modules in each, import cycles between them), the modules
of each package and the longest function (`tests/test_names.py` holds every
function to `MAX_FUNCTION_LINES`): docs/architecture.md quotes them before
and after each reshaping.
"""

from __future__ import annotations

import ast
import functools
import importlib
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import orchard

SRC = Path(orchard.__file__).parent.parent
SHARED = ("orchard.cache", "orchard.confine", "orchard.errors", "orchard.jsonlines", "orchard.limits",
          "orchard.process",
          "orchard.sandbox_pids", "orchard.scratch", "orchard.tomlfile")  # both use
FLOORS = ("records", "text", "config", "db", "workers", "judge", "landing", "notebook", "loop",
          "finalize")  # bottom first
WORKERS = "orchard.lab.workers"
WORKER_FOLDERS = ("vcs", "sandbox", "jobs", "workspace", "launchers", "worker_run", "executors", "dask",
                  "lab_executor")  # bottom first; lab_executor is a module
BENCH = "orchard.bench"
BENCH_FOLDERS = ("binary", "lock", "machine", "sandbox", "deciding", "suites", "measuring", "results",
                 "checks", "held_out", "campaigns", "exports", "lanes")  # bottom first; the first three are modules
BENCH_DOORS = {
    "orchard.lab.judge.measuring": "measures: verdicts, calibration, opportunities, the lock's holder",
    "orchard.lab.records.verdict": "the bench's verdict records, which the lab's records hold",
    "orchard.lab.workers.workspace.bench_view": "a worker's bench without the suite's held-out inputs",
}
FOREIGN = ("demo/target/", "demo/bench/")  # a foreign project's code, which the demo's patches edit
MAX_FUNCTION_LINES = 50
Graph = Mapping[str, frozenset[str]]


def module_name(src: Path, path: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, package: str) -> list[tuple[int, str]]:
    """Every name `source` (a module of `package`) imports, with its line; `from orchard import bench` is
    `orchard.bench`, `from orchard.bench import rows` is `orchard.bench.rows` (not the package: a module is
    the module it imports from), and relative imports are resolved."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def import_graph(src: Path, top: str = "orchard") -> dict[str, frozenset[str]]:
    """Each module under `src/<top>` and the modules of that tree it imports (a name imported from a module is
    that module)."""
    paths = {module_name(src, path): path for path in sorted((src / top).rglob("*.py"))}
    graph: dict[str, frozenset[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for _, target in imported(path.read_text(), package):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = frozenset(targets)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            step = next((t for t in edges if t in graph), None)
            if step is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = stack[stack.index(node):]
                    del stack[stack.index(node):]
                    if len(group) > 1:
                        found.append(sorted(group))
            elif step not in index:
                index[step] = low[step] = len(index)
                stack.append(step)
                work.append((step, iter(sorted(graph[step]))))
            elif step in stack:
                low[node] = min(low[node], index[step])
    return found


def back_edges(graph: Graph) -> set[tuple[str, str]]:
    """Imports that point back up: the ones a depth-first walk meets while their target is still open."""
    state: dict[str, int] = {}
    back: set[tuple[str, str]] = set()
    for root in sorted(graph):
        if root in state:
            continue
        state[root] = 1
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, edges = work[-1]
            step = next((t for t in edges if t in graph), None)
            if step is None:
                state[node] = 2
                work.pop()
            elif state.get(step) == 1:
                back.add((node, step))
            elif step not in state:
                state[step] = 1
                work.append((step, iter(sorted(graph[step]))))
    return back


def part(module: str, package: str = "orchard.lab") -> str | None:
    """The module or package right under `package` that holds `module` (None: the package itself, or outside)."""
    inside = module.split(".")[len(package.split(".")):]
    return inside[0] if module.startswith(package + ".") and inside else None


def floor(module: str, floors: tuple[str, ...] = FLOORS, package: str = "orchard.lab") -> int | None:
    """The floor of a module of `package` (its index in `floors`), None for the package itself and anything
    outside."""
    here = part(module, package)
    return floors.index(here) if here in floors else None


def upward(graph: Graph, floors: tuple[str, ...] = FLOORS, package: str = "orchard.lab") -> list[str]:
    """`module -> target` for each import of a floor of `package` above the importer's own."""
    return [f"{name} -> {target}" for name, targets in sorted(graph.items()) for target in sorted(targets)
            if (here := floor(name, floors, package)) is not None
            and (there := floor(target, floors, package)) is not None and there > here]


@dataclass(frozen=True)
class Counts:
    modules: int
    layers: int
    up: int
    cycles: int


def counts(graph: Graph, floors: tuple[str, ...] = FLOORS, package: str = "orchard.lab") -> Counts:
    """The lab's modules (package `__init__`s aside), its layers (the longest chain of imports once the imports
    pointing up are set aside), those imports (against the floors, then against the import order: a cycle's
    closing import) and its import cycles. A flat lab (today's main: `floors=()`) has the second kind only."""
    lab = {name: frozenset(t for t in targets if t.startswith(package + "."))
           for name, targets in graph.items() if name.startswith(package + ".")}
    up = {tuple(edge.split(" -> ")) for edge in upward(lab, floors, package)}
    up |= back_edges({name: frozenset(t for t in targets if (name, t) not in up) for name, targets in lab.items()})

    @cache
    def layer(name: str) -> int:
        return 1 + max((layer(t) for t in lab[name] if (name, t) not in up), default=0)

    modules = [name for name in lab if name not in {t.rpartition(".")[0] for t in lab} | {package}]
    return Counts(len(modules), max(map(layer, lab)), len(up), len(cycles(lab)))


@dataclass(frozen=True)
class Folders:
    modules: dict[str, int]  # per module or package right under the package (its `__init__` aside)
    cycles: int  # import cycles between them


def folders(graph: Graph, package: str = WORKERS) -> Folders:
    """The modules of each folder of `package` (a module of its own counts as one) and the import cycles
    between its folders (each folder one node)."""
    inside = {name: targets for name, targets in graph.items() if part(name, package) is not None}
    packages = {name.rpartition(".")[0] for name in graph}
    per = Counter(str(part(name, package)) for name in inside if name not in packages)
    between: dict[str, set[str]] = {}
    for name, targets in inside.items():
        here = str(part(name, package))
        between.setdefault(here, set()).update(
            there for target in targets if (there := part(target, package)) not in (None, here))
    return Folders(dict(sorted(per.items())), len(cycles({k: frozenset(v) for k, v in between.items()})))


def packages(graph: Graph) -> dict[str, int]:
    """The modules of each package (its `__init__` aside), by the package's name; a foreign project's left out."""
    names = {name.rpartition(".")[0] for name in graph}
    foreign = tuple("orchard." + path.replace("/", ".") for path in FOREIGN)
    return dict(sorted(Counter(name.rpartition(".")[0] for name in graph
                               if name not in names and not name.startswith(foreign)).items()))


def function_lengths(package: Path) -> dict[str, int]:
    """Every function's lines, from its `def` line to its last (docstring included, decorators not), by
    `module.py:Class.function`; a foreign project's code (`FOREIGN`) left out."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, where: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[f"{where}:{name[:-1]}"] = (child.end_lineno or child.lineno) - child.lineno + 1
            visit(child, where, name)

    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        if not where.startswith(FOREIGN):
            visit(ast.parse(path.read_text()), where, "")
    return found


@dataclass(frozen=True)
class Longest:
    function: str
    lines: int
    over: int  # functions over MAX_FUNCTION_LINES


def longest(package: Path) -> Longest:
    lengths = function_lengths(package)
    name = max(lengths, key=lambda function: lengths[function])
    return Longest(name, lengths[name], sum(1 for lines in lengths.values() if lines > MAX_FUNCTION_LINES))


def importers(graph: Graph, modules: Iterable[str], package: str) -> list[str]:
    """`module -> target` for each import of `package` (or anything in it) by `modules`."""
    return [f"{name} -> {target}" for name in sorted(modules) for target in sorted(graph[name])
            if target == package or target.startswith(package + ".")]


@functools.cache
def src_graph() -> dict[str, frozenset[str]]:
    """src/'s import graph, read once per process when a test first asks (not at collection: every xdist worker
    collects every module)."""
    return import_graph(SRC)


def test_no_import_cycle_anywhere() -> None:
    assert len(src_graph()) > 100, "the modules of src/ were found"
    assert cycles(src_graph()) == []


def test_no_lab_floor_imports_one_above_it() -> None:
    lab_packages = {name.split(".")[2] for name in src_graph()
                    if name.count(".") >= 2 and name.startswith("orchard.lab.")}
    assert lab_packages - {"templates"} <= set(FLOORS), "every package of the lab has its floor"
    assert upward(src_graph()) == []


@pytest.mark.parametrize(("package", "order"), [(WORKERS, WORKER_FOLDERS), (BENCH, BENCH_FOLDERS)])
def test_no_folder_imports_one_above_it_and_no_folder_cycle(package: str, order: tuple[str, ...]) -> None:
    assert {part(name, package) for name in src_graph()} - {None} == set(order), "every folder its floor"
    assert upward(src_graph(), order, package) == []
    assert folders(src_graph(), package).cycles == 0


def test_records_import_nothing_of_the_lab_but_records() -> None:
    records = [name for name in src_graph() if name.startswith("orchard.lab.records")]
    assert len(records) > 4
    assert [edge for edge in importers(src_graph(), records, "orchard")
            if not edge.split(" -> ")[1].startswith(("orchard.lab.records", *SHARED))] == [
        "orchard.lab.records.verdict -> orchard.bench"]


def test_records_do_no_io() -> None:
    """Records are data: none imports what reads or writes files, runs processes or opens connections."""
    io = ("os", "shutil", "subprocess", "socket", "tempfile", "orchard.process", "orchard.tomlfile",
          "orchard.jsonlines")
    records = sorted((SRC / "orchard" / "lab" / "records").glob("*.py"))
    assert len(records) > 4
    found = [f"{path.name}: {name}" for path in records for _, name in imported(path.read_text(), "orchard.lab.records")
             if name in io or name.startswith(tuple(f"{module}." for module in io))]
    assert found == []


def test_bench_never_imports_lab() -> None:
    bench = [name for name in src_graph() if name.startswith("orchard.bench")]
    assert len(bench) > 20, "the bench's modules were found"
    assert importers(src_graph(), bench, "orchard.lab") == []


def test_the_lab_imports_the_bench_in_three_modules_and_only_its_public_surface() -> None:
    lab = [name for name in src_graph() if name.startswith("orchard.lab")]
    assert importers(src_graph(), lab, "orchard.bench") == [f"{door} -> orchard.bench" for door in sorted(BENCH_DOORS)]


def test_the_bench_surface_imports_each_name_when_first_used() -> None:
    """Every public name of `orchard.bench` is its module's own object, and the lab's records take the
    bench's verdict records without importing numpy and the statistics (each lab command imports them)."""
    bench = importlib.import_module("orchard.bench")
    assert sorted(bench.__all__) == sorted(bench._HOMES)
    for name, (module, attribute) in bench._HOMES.items():
        assert getattr(bench, name) is getattr(importlib.import_module(module), attribute), name
    probe = ("import sys, orchard.lab.records.verdict; "
             "print(sorted({'numpy', 'orchard.bench.deciding.stats'} & set(sys.modules)))")
    fresh = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert fresh.stdout == "[]\n"


def test_the_shared_modules_import_neither_package() -> None:
    assert importers(src_graph(), SHARED, "orchard.bench") == importers(src_graph(), SHARED, "orchard.lab") == []


def test_every_way_of_importing_is_seen() -> None:
    """The check itself: absolute, from-the-package, relative and deferred imports are all found."""
    source = ("import orchard.bench.lock\nfrom orchard import bench\nfrom ....bench.rows import step_row\n"
              "from ...judge import measuring\ndef later():\n    from orchard.bench import stats\n"
              "if TYPE_CHECKING:\n    from orchard.lab.loop.lab import Lab\n")
    names = {name for _, name in imported(source, "orchard.lab.workers.vcs")}
    assert {"orchard.bench.lock", "orchard.bench", "orchard.bench.rows.step_row", "orchard.bench.stats",
            "orchard.lab.judge.measuring", "orchard.lab.loop.lab.Lab"} <= names


def test_the_checks_see_a_cycle_and_an_import_pointing_up() -> None:
    graph = {"orchard.lab.judge.a": frozenset({"orchard.lab.loop.b"}),
             "orchard.lab.loop.b": frozenset({"orchard.lab.judge.a"}), "orchard.lab.records.c": frozenset()}
    assert cycles(graph) == [["orchard.lab.judge.a", "orchard.lab.loop.b"]]
    assert upward(graph) == ["orchard.lab.judge.a -> orchard.lab.loop.b"]
    assert counts(graph) == Counts(modules=3, layers=2, up=1, cycles=1)
    inside = {"orchard.lab.workers.a.x": frozenset({"orchard.lab.workers.b.y"}),
              "orchard.lab.workers.b.y": frozenset({"orchard.lab.workers.a.z"}),
              "orchard.lab.workers.a.z": frozenset(), "orchard.lab.workers.c": frozenset()}
    assert upward(inside, ("b", "a", "c"), WORKERS) == ["orchard.lab.workers.b.y -> orchard.lab.workers.a.z"]
    assert folders(inside) == Folders({"a": 2, "b": 1, "c": 1}, cycles=1)
    assert packages(inside) == {"orchard.lab.workers": 1, "orchard.lab.workers.a": 2, "orchard.lab.workers.b": 1}


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else SRC
    tree = import_graph(root)
    print(counts(tree, FLOORS if any(name.startswith("orchard.lab.records.") for name in tree) else ()))
    print(folders(tree))
    print(folders(tree, BENCH))
    print(packages(tree))
    print(longest(root / "orchard"))
