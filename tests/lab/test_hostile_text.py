"""Hostile text through a whole lab (issue 31, item 4): stored as given, shown safely everywhere.

One hypothesis, added with `orchard backlog add` flags, carries a byte that
is not UTF-8 (0x9b), ESC and BEL (an OSC 52 clipboard write, colours), the
one-character C1 CSI (U+009B) and a right-to-left override (U+202E) in its
title, and a `javascript:` link, a remote image and backticks in its change.
On main the add itself tracebacked, and every later `run`, `report` and
`backlog add` with it (UnicodeEncodeError) until lab.db was edited by hand;
ESC, BEL and U+202E went raw into the Markdown files, the commit messages on
the user's main, REVIEW.md and the pull-request bodies. Here the lab runs,
lands it, finalizes it, and no output holds a raw control character, a live
link or image, or anything that is not UTF-8.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import STDOUT_SUITE, TARGET_FILES, git, make_repo
from tests.lab.test_bad_output import _config

TITLE = "x \udc9b y \x1b]52;c;cm0gLXJmIH4K\x07 \x1b[31mred\x1b[0m \x9b2J \u202etxt.exe"
SHOWN_TITLE = "x \\x9b y \\x1b]52;c;cm0gLXJmIH4K\\x07 \\x1b[31mred\\x1b[0m \\x9b2J \\u202etxt.exe"
CHANGE = "see [docs](javascript:alert(1)) and ![pixel](https://evil.example/p.png) then `a` `` b"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\udc9b")  # none of these reaches anything a person reads


@dataclass(frozen=True)
class Lab:
    root: Path
    target: Path  # the user's repository
    outputs: dict[str, subprocess.CompletedProcess[str]]


def _orchard(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """A command's output as written: a byte that is not UTF-8 shows up as its surrogate escape (in `RAW`)."""
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, encoding="utf-8",
                          errors="surrogateescape", timeout=900, check=False)


def _text(path: Path) -> str:
    """A file as a reader gets it: it must be UTF-8 (a byte that is not would have been written raw)."""
    return path.read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    base = tmp_path_factory.mktemp("hostile-text")
    target = make_repo(base / "target-repo", TARGET_FILES)
    (base / "suite.toml").write_text(STDOUT_SUITE)
    (base / "orchard.toml").write_text(_config({}))
    root = init_workspace(base / "ws", str(target), None, base / "orchard.toml").root
    outputs = {"add": _orchard("backlog", "add", root, "--title", TITLE, "--metric", "out/stdout_bytes",
                               "--change", CHANGE, "--scope", "src/")}
    for name, command in (("list", ("backlog", "list", root)), ("run", ("run", root)),
                          ("list-all", ("backlog", "list", root, "--all")), ("status", ("status", root)),
                          ("report", ("report", root)), ("finalize", ("finalize", root)),
                          ("add-again", ("backlog", "add", root, "--metric", "out/stdout_bytes", "--change", "z"))):
        outputs[name] = _orchard(*command)
    return Lab(root, target, outputs)


def test_every_command_works_with_the_title_and_prints_it_escaped(lab: Lab) -> None:
    for name, result in lab.outputs.items():
        assert result.returncode == 0, (name, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, (name, result.stderr)
        for raw in RAW:
            assert raw not in result.stdout + result.stderr, (name, raw, result.stdout)
    for name in ("add", "list", "list-all"):
        assert SHOWN_TITLE in lab.outputs[name].stdout, (name, lab.outputs[name].stdout)


def test_the_lab_landed_it_and_its_commits_on_the_users_main_show_the_title_escaped(lab: Lab) -> None:
    messages = git(lab.target, "log", "--format=%B", "lab/ws/main")  # where the lab publishes its main
    assert f"lab: {SHOWN_TITLE}" in messages, messages
    assert messages.count(SHOWN_TITLE) == 2, "the lab's commit and its merge"
    for raw in RAW:
        assert raw not in messages, raw


@pytest.mark.parametrize("name", ["JOURNAL.md", "backlog.md", "REVIEW.md", "report.html"])
def test_files_people_read_hold_the_title_escaped_and_nothing_raw(lab: Lab, name: str) -> None:
    text = _text(lab.root / name)
    for raw in RAW:
        assert raw not in text, (name, raw)
    assert "x \\x9b y \\x1b" in text and "\\u202etxt.exe" in text, (name, text)


def _rendered(markdown: str) -> str:
    return MarkdownIt("commonmark").render(markdown)


def test_review_and_pull_request_bodies_show_links_images_and_backticks_as_text(lab: Lab) -> None:
    bodies = sorted((lab.root / "review").glob("*.md"))
    assert bodies, "finalize wrote a pull-request body"
    for path in [lab.root / "REVIEW.md", *bodies]:
        text = _text(path)
        for raw in RAW:
            assert raw not in text, (path.name, raw)
        page = _rendered(text)
        assert "<a " not in page, (path.name, page)
        assert "<img" not in page, (path.name, page)
        assert "[docs](javascript:alert(1)) and ![pixel](https://evil.example/p.png) then `a` `` b" in page, page
