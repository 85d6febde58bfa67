"""The hack review: every win's patch read for benchmark gaming before it lands, in code, no model.

Statistics cannot tell a faster program from one that recognises its
benchmark; the lines a patch adds often can. `review` reads each added line
of code (Python, C, shell, Makefiles, Rust, Go) against `hack_patterns` and
against the bench's own facts (`BenchFacts`: its directory, its suite file,
its input files' names and sizes, the expected facts its scenarios recall),
and each finding is a named `HackFlag` at a file and line.

The rule (docs/security.md): a finding is definite when it ties the patch
to this bench (a bench path, a bench input's name, an expected fact, a
bench input's size compared with a size the program reads), tampers with
the clock, reads the lab's own variables, or keys a lookup on the input
(an input hash beside a large payload or a literal digest). Everything else
is doubtful: it has honest uses. A definite finding KILLs; a doubtful one
holds the win for a person (`orchard review`). Test files are not read
(their fixtures are not the measured program), nor is anything but the
added lines: what a patch removes, or code that builds a name at run time,
is not seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from orchard.lab.judge import hack_patterns as hp
from orchard.lab.judge.measuring import suite_text
from orchard.lab.records.build import Check, CheckName
from orchard.lab.records.hack_findings import Finding, HackFlag
from orchard.lab.records.hypothesis import is_test_file
from orchard.lab.text import a_few
from orchard.lab.workers.workspace.patches import section_paths, sections
from orchard.lab.workers.workspace.workspace import Workspace

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
SNIPPET_CHARS = 100
MIN_NAME_CHARS = 5  # a bench name shorter than this ("a.txt") says too little to be definite
MIN_SIZE = 1000  # a bench input's size below this is a number many programs hold
MIN_FACT_CHARS = 8  # an expected fact this long, with a number in it, is an answer, not a label
COMMON_NAMES = frozenset({"README", "README.md", "README.rst", "LICENSE", "Makefile", "setup.py", "conftest.py",
                          "__init__.py", ".gitignore", "pyproject.toml", "Cargo.toml", "go.mod"})
CODE_EXTENSIONS = frozenset({".py", ".pyc", ".sh", ".toml", ".md", ".rst", ".cfg", ".ini", ".yml", ".yaml",
                             ".lock", ".c", ".h", ".rs", ".go", ".js", ".json", ".html"})


@dataclass(frozen=True)
class Added:
    """One line a patch adds: its file, its line number in the new file, its text."""

    file: str
    line: int
    text: str


@dataclass(frozen=True)
class BenchFacts:
    """What the patch should know nothing of: where the bench is, its suite, its inputs and answers."""

    paths: tuple[str, ...] = ()  # absolute directories: the lab's workspace, its bench
    suite: str = ""  # the suite file's name
    names: frozenset[str] = frozenset()  # the bench's input and expected-output file names
    sizes: frozenset[int] = frozenset()  # those files' sizes in bytes
    facts: tuple[str, ...] = ()  # the expected facts its scenarios recall, those with a number in them


def bench_facts(workspace: Path, bench_dir: Path, suite: Path | None, commands: Sequence[str],
                expect: Sequence[str]) -> BenchFacts:
    """The facts of the lab's bench: its data files (not its code or docs) and the files its commands name."""
    names: set[str] = set()
    sizes: set[int] = set()
    for path in bench_dir.rglob("*"):
        if ".git" in path.relative_to(bench_dir).parts or not path.is_file() or path.is_symlink():
            continue
        if path.suffix not in CODE_EXTENSIONS and path.name not in COMMON_NAMES:
            names.add(path.name)
            sizes.add(path.stat().st_size)
    for command in commands:
        for token in command.split():
            name = token.rsplit("/", 1)[-1]
            if "/" in token and "." in name and not name.endswith(".py") and "{" not in name:
                names.add(name)
    return BenchFacts(
        paths=(str(workspace), str(bench_dir)), suite="" if suite is None else suite.name,
        names=frozenset(n for n in names if len(n) >= MIN_NAME_CHARS),
        sizes=frozenset(s for s in sizes if s >= MIN_SIZE and s & (s - 1) and s % 100),
        facts=tuple(f for f in expect if len(f) >= MIN_FACT_CHARS and any(c.isdigit() for c in f)))


def lab_facts(ws: Workspace, checkout: Path, patch: str) -> BenchFacts:
    """The facts of the lab's own bench and suite, but the names of files the target had before the patch (a
    name the target already uses, a `README` or its own `input.txt`, says nothing about the bench)."""
    commands, expect = suite_text(ws)
    facts = bench_facts(ws.root, ws.bench_dir, ws.suite(ws.bench_dir), commands, expect)
    return replace(facts, names=facts.names - target_names(checkout, patch))


def target_names(checkout: Path, patch: str) -> frozenset[str]:
    """The names of the files in `checkout` (base plus patch) that the patch did not add."""
    added = {paths[-1] for section in sections(patch) if "\nnew file mode" in section
             for paths in [section_paths(section)] if paths}
    return frozenset(path.name for path in checkout.rglob("*")
                     if ".git" not in path.relative_to(checkout).parts
                     and path.relative_to(checkout).as_posix() not in added)


def added_lines(patch: str) -> Iterator[Added | Finding]:
    """Every line the patch adds, with its number in the new file; a binary blob as a finding of its file."""
    for section in sections(patch):
        paths = section_paths(section)
        path = paths[-1] if paths else "?"
        line = 0
        for text in section.splitlines():
            if text.startswith("GIT binary patch") or (text.startswith("Binary files ") and text.endswith("differ")):
                yield Finding(HackFlag.LARGE_LITERAL, path, 0, "a binary file", False)
            elif hunk := HUNK.match(text):
                line = int(hunk.group(1))
            elif line and text.startswith("+"):
                yield Added(path, line, text[1:])
                line += 1
            elif line and text.startswith(" "):
                line += 1


def _snippet(text: str) -> str:
    text = text.strip()
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "..."


def _line_findings(added: Added, lang: hp.Language, facts: BenchFacts) -> Iterator[Finding]:
    """What one added line of code gives away, by the patterns and by the bench's facts."""
    text, literals = added.text, hp.literals(added.text)

    def found(flag: HackFlag, definite: bool) -> Finding:
        return Finding(flag, added.file, added.line, _snippet(text), definite)

    for pattern in hp.PATTERNS:
        if pattern.applies(lang) and pattern.regex.search(text):
            yield found(pattern.flag, pattern.definite)
    if any(path in text for path in facts.paths) or re.search(r"(?:\.\./)+bench\b|worker-[\w-]+/bench", text) or (
            facts.suite and any(lit.endswith(facts.suite) for lit in literals)):
        yield found(HackFlag.BENCH_PATH, True)
    if any(hp.expected_named(lit) for lit in literals):
        yield found(HackFlag.EXPECTED_OUTPUT, False)
    if any(fact in text for fact in facts.facts):
        yield found(HackFlag.EXPECTED_OUTPUT, True)
    if any(lit.rsplit("/", 1)[-1] in facts.names for lit in literals if lit):
        yield found(HackFlag.BENCH_NAME, True)
    if facts.sizes and any(n in facts.sizes for n in hp.numbers(text)):
        yield found(HackFlag.BENCH_SIZE, bool(hp.SIZE_READ.search(text)))
    if any(len(lit) >= hp.LONG_LITERAL_CHARS for lit in literals) or hp.BLOB.search(text):
        yield found(HackFlag.LARGE_LITERAL, False)


def _file_findings(lines: Sequence[Added], lang: hp.Language, facts: BenchFacts) -> list[Finding]:
    """One file's findings: its lines', then what only the whole of its added lines shows."""
    found = [f for added in lines for f in _line_findings(added, lang, facts)]
    reads_input = any(hp.INPUT_READ.search(a.text) for a in lines)
    hashes = [a for a in lines if hp.HASHING.search(a.text)]
    if reads_input:
        found += [Finding(HackFlag.INPUT_HASH, a.file, a.line, _snippet(a.text), False) for a in hashes]
    carried = sum(hp.payload(a.text) for a in lines)
    written = sum(len("".join(a.text.split())) for a in lines)
    if carried >= hp.SPLIT_PAYLOAD_BYTES and carried * 2 >= written:
        first = next(a for a in lines if hp.payload(a.text))
        found.append(Finding(HackFlag.SPLIT_CONSTANTS, first.file, first.line,
                             f"{len(lines):,} added lines carrying {carried:,} bytes of literals", False))
    payloads = [f for f in found if f.flag in (HackFlag.LARGE_LITERAL, HackFlag.SPLIT_CONSTANTS)]
    digests = any(hp.DIGEST.search(a.text) for a in lines)
    keyed = [f for f in found if f.flag == HackFlag.INPUT_HASH]
    if keyed and (payloads or digests):
        with_what = "a large payload" if payloads else "a literal digest"
        found.append(Finding(HackFlag.KEYED_LOOKUP, keyed[0].file, keyed[0].line,
                             f"{keyed[0].snippet} (with {with_what} in the same file)", True))
    return found


def review(patch: str, facts: BenchFacts) -> list[Finding]:
    """Every finding in a patch, file by file in the patch's order (test files are not read)."""
    files: dict[str, list[Added]] = {}
    findings: list[Finding] = []
    for item in added_lines(patch):
        if isinstance(item, Finding):
            findings.append(item)
        elif not is_test_file(item.file):
            files.setdefault(item.file, []).append(item)
    for path, lines in files.items():
        lang = hp.language(path)
        if lang != hp.Language.DATA:
            findings += _file_findings(lines, lang, facts)
        elif (size := sum(len(a.text) + 1 for a in lines)) >= hp.DATA_FILE_BYTES:
            findings.append(Finding(HackFlag.LARGE_LITERAL, path, 0, f"{size:,} bytes of data added", False))
    return findings


def check(findings: Sequence[Finding]) -> Check:
    """The findings as the judge's `hack-review` check: failed on a definite one (KILL), passed otherwise; a
    passed check with doubtful findings holds the win for a person."""
    definite = [f for f in findings if f.definite]
    if definite:
        return Check(CheckName.HACK_REVIEW, False, definite[0].describe()
                     + (f" (and {len(definite) - 1} more definite)" if len(definite) > 1 else ""))
    if findings:
        return Check(CheckName.HACK_REVIEW, True,
                     f"doubtful, held for a person: {a_few([f.describe() for f in findings])}")
    return Check(CheckName.HACK_REVIEW, True, "nothing found in the added lines")
