"""Python-Markdown from PyPI as a lab's target (the red-team battery's, and the variants' cost benchmark's): its
build, the suite a user writes for it, the document it renders, and honest wins of different sizes on that suite.

The suite renders one fixture document with the CLI (`python -m markdown`), a recall gate on a few headings
(`expect_file`), no held-out scenario.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.db import ExperimentRecord
from tests.lab.lab_helpers import git, pypi_sdist

PACKAGE = "markdown==3.7"
SUITE = """
[suite]
name = "markdown"
runs = 16
min_runs = 8
calibration_runs = 8

[[scenario]]
name = "render"
command = ["{bin}", "-m", "markdown", "{suite_dir}/fixture.md"]
expect_file = "facts.txt"

[[metric]]
name = "wall_ms"

[[metric]]
name = "stdout_bytes"
floor = 0.0

[[gate]]
kind = "information_recall"
"""
# a development install by hand (no network, no wheel package needed; the released Markdown.egg-info beside the
# package gives its extensions' entry points, the system's PyYAML its tests), then a check that it imports
# (a venv without pip, which nothing here runs: ensurepip took 4 s of CPU, 17 s of wall at load 12, of each of the
# lab's dozens of builds, every worker's and every judge's)
BUILD = ("python3 -m venv --without-pip --system-site-packages .venv && "
         "echo \"$PWD\" > \"$(echo .venv/lib/python3*/site-packages)/markdown-dev.pth\" "
         "&& .venv/bin/python -c 'import markdown'")
TARGET = {"build": BUILD, "test": ".venv/bin/python -m unittest discover -s tests -t . -q",
          "binary": ".venv/bin/python"}
MAIN = "markdown/__main__.py"
CORE = "markdown/core.py"


DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def handbook(sections: int = 120) -> str:
    """The user's document: `sections` sections of a heading, a paragraph with a hard line break, then blocks every
    section repeats (a list, opening hours line by line, a code block, a rule, a quote), as a handbook's boilerplate
    does."""
    parts = ["# The handbook\n"]
    for n in range(1, sections + 1):
        parts.append(f"## Section {n}\n\nThe *first* paragraph of section {n} has a [link](https://example.org/{n})"
                     f" and `code`.  \nA hard break, then **strong** text and more words about topic {n}.\n\n"
                     + "".join(f"- item {i} with _emphasis_ and a [link](https://example.org/item/{i})\n"
                               for i in range(12))
                     + "\nOpening hours:  \n" + "".join(f"{day} 9 to 5  \n" for day in DAYS) + "Sunday closed\n"
                     + "\nThen some code:\n\n    code line\n    another line\n\n---\n\n"
                       "> a quote, the same in every section, with *emphasis*\n")
    return "\n".join(parts)


FACTS = "<h1>The handbook</h1>\n<h2>Section 1</h2>\n<h2>Section 60</h2>\n<h2>Section 120</h2>\n"

# Honest wins, in the command line's `run` (which Markdown's own tests do not run): HTML instead of XHTML (`<br>`,
# `<hr>`) unless asked for, and the end tags HTML lets go (`</li>`, `</p>`) left out by a postprocessor: fewer
# bytes, the same document to a browser. Each edits its own lines, so one lands on top of the other.
OMIT = ("import logging\nfrom markdown.extensions import Extension\nfrom markdown.postprocessors import "
        "Postprocessor\n\n\nclass _OmitEndTags(Extension, Postprocessor):\n"
        "    \"\"\"HTML lets a list item's and a paragraph's end tag go: fewer bytes, the same document.\"\"\"\n\n"
        "    def extendMarkdown(self, md):\n        md.postprocessors.register(self, 'omit-end-tags', 0)\n\n"
        "    def run(self, text):\n        return text.replace('</li>', '').replace('</p>', '')\n")
HTML = ("    if not any(arg.startswith(('-o', '--output_format')) for arg in sys.argv[1:]):\n"
        "        options['output_format'] = 'html'\n")
# A speed win: the CLI imports PyYAML at its start for a config file it is rarely given (a tenth of its time here).
LAZY_YAML = ("    def yaml_load(fp):\n"
             "        \"\"\"PyYAML imported when a config file is read, not by every run.\"\"\"\n"
             "        try:\n            from yaml import unsafe_load as load\n"
             "        except ImportError:\n            from json import load\n"
             "        return load(fp)\n")
# Two speed wins in the inline pass (`InlineProcessor`, two thirds of a render), measured on this suite with
# CPU time, the least of 21 runs each, on a loaded machine: release 267 ms, prefilter 241 ms (about 1.1-1.2x),
# repeated 157 ms (about 1.7x), both 150 ms. The rest of a run (the interpreter's start, the imports: about 110 ms)
# no change to the inline pass can shorten. Each edits its own lines, so one lands on top of the other.
TREE = "markdown/treeprocessors.py"
# The prefilter: a built-in pattern's expression cannot match a text without its mark (a backtick, a bracket, ...),
# so a text lacking it is not searched with it, and the patterns are sorted once per document, not at every step.
NEEDS = ("# What each built-in inline pattern's expression cannot match without: a text lacking all of a\n"
         "# pattern's strings is not searched with it (most texts lack most marks; each search costs a scan).\n"
         "_NEEDS = {\n"
         "    inlinepatterns.BACKTICK_RE: ('`',), inlinepatterns.ESCAPE_RE: ('\\\\',),\n"
         "    inlinepatterns.LINK_RE: ('[',), inlinepatterns.IMAGE_LINK_RE: ('![',),\n"
         "    inlinepatterns.AUTOLINK_RE: ('<',), inlinepatterns.AUTOMAIL_RE: ('<',),\n"
         "    inlinepatterns.HTML_RE: ('<',), inlinepatterns.ENTITY_RE: ('&',),\n"
         "    inlinepatterns.NOT_STRONG_RE: ('*', '_'), inlinepatterns.LINE_BREAK_RE: ('  \\n',),\n"
         "    r'\\*': ('*',), '_': ('_',),\n}\n\n\n")
LOOP = ("            count = len(self.inlinePatterns)\n            while patternIndex < count:\n"
        "                data, matched, startIndex = self.__applyPattern(\n"
        "                    self.inlinePatterns[patternIndex], data, patternIndex, startIndex\n                )\n")
SKIPPING = ("            count = len(self.__patterns)\n            while patternIndex < count:\n"
            "                pattern, needs = self.__patterns[patternIndex]\n"
            "                if not any(text in data for text in needs or ('',)):\n"
            "                    matched, startIndex = False, 0\n                else:\n"
            "                    data, matched, startIndex = self.__applyPattern(\n"
            "                        pattern, data, patternIndex, startIndex\n                    )\n")
STASH = "        self.stashed_nodes: dict[str, etree.Element | str] = {}\n"
SORTED = ("        # the patterns in order with what each needs, sorted once per document, not at every step\n"
          "        self.__patterns = [(pattern, _NEEDS.get(getattr(pattern, 'pattern', None), ()))\n"
          "                           for pattern in self.inlinePatterns]\n")
# Repeated texts: a leaf block (a list item, a paragraph) whose text was met under the same ancestors renders to
# the same elements when every pattern is a built-in one (they keep nothing between texts; an extension's may, so
# then nothing is copied): it is copied from the first once the pass is done instead of being parsed again.
LEAF = "                    child.text, util.AtomicString\n                ):\n"
REPEATED = (
    "    def __repeated(self, child: etree.Element) -> bool:\n"
    "        \"\"\"Whether `child` is a leaf whose text was met under the same ancestors before: it renders\n"
    "        to the same elements (built-in patterns keep nothing between texts), so it is copied from the\n"
    "        first once the inline pass is done (documents repeat list items and boilerplate).\"\"\"\n"
    "        if len(child) or not self.__pure:\n            return False\n"
    "        model = self.__first.setdefault((*self.ancestors, child.tag.lower(), child.text), child)\n"
    "        if model is not child:\n            self.__again.append((child, model))\n"
    "        return model is not child\n\n")
FIRSTS = ("        stack = [(tree, tree_parents)]\n"
          "        self.__pure = all(type(p).__module__ == inlinepatterns.__name__ for p in self.inlinePatterns)\n"
          "        self.__first: dict[tuple[str, ...], etree.Element] = {}\n"
          "        self.__again: list[tuple[etree.Element, etree.Element]] = []\n")
COPIED = ("        for child, model in self.__again:\n            child.text = model.text\n"
          "            child.extend(copy.deepcopy(sub) for sub in model)\n        return tree\n")
# the wins large enough to show on this suite whatever the machine's load, whichever lands first
DECISIVE = frozenset({"repeated-inline"})
HONEST = {
    "lazy-yaml": ("render/wall_ms", MAIN, (("    from yaml import unsafe_load as yaml_load\n", LAZY_YAML),)),
    "html-output": ("render/stdout_bytes", MAIN, (("    # Run\n", HTML + "    # Run\n"),)),
    "omit-end-tags": ("render/stdout_bytes", MAIN, (("import logging\n", OMIT),
                                                    ("    console_handler = logging.StreamHandler()\n",
                                                     "    options['extensions'] = options['extensions'] + "
                                                     "[_OmitEndTags()]\n    console_handler = "
                                                     "logging.StreamHandler()\n"))),
    "inline-prefilter": ("render/wall_ms", TREE, (("class InlineProcessor(Treeprocessor):\n",
                                                    NEEDS + "class InlineProcessor(Treeprocessor):\n"),
                                                   (LOOP, SKIPPING), (STASH, STASH + SORTED))),
    "repeated-inline": ("render/wall_ms", TREE, (("import re\n", "import copy\nimport re\n"),
                                                  ("    def run(self, tree: etree.Element, ancestors",
                                                   REPEATED + "    def run(self, tree: etree.Element, ancestors"),
                                                  ("        stack = [(tree, tree_parents)]\n", FIRSTS),
                                                  (LEAF, "                    child.text, util.AtomicString\n"
                                                         "                ) and not self.__repeated(child):\n"),
                                                  ("        return tree\n\n\nclass Prettify",
                                                   COPIED + "\n\nclass Prettify"))),
}

# Further speed wins for a larger document, where the render is most of a run; with the three above they make one
# rewrite of about 3x (test_large_win_pypi). Each keeps the output byte for byte (Markdown's own tests pass).
UTIL, PARSER = "markdown/util.py", "markdown/blockparser.py"
FASTER = {
    # the registry's items in order kept until it changes, not listed again at every block and every text
    "registry-order": (UTIL, (
        ("        self._is_sorted = False\n        self._data[name] = item\n",
         "        self._is_sorted = False\n        self._items = None\n        self._data[name] = item\n"),
        ("            del self._priority[index]\n            del self._data[name]\n",
         "            del self._priority[index]\n            del self._data[name]\n            self._items = None\n"),
        ("        self._sort()\n        return iter([self._data[k] for k, p in self._priority])\n",
         "        self._sort()\n        if getattr(self, '_items', None) is None:\n"
         "            self._items = [self._data[k] for k, p in self._priority]\n        return iter(self._items)\n"))),
    # only a text holding an escape's start mark is searched for escapes
    "unescape-marked": (TREE, (
        ("    def unescape(self, text: str) -> str:\n        return self.RE.sub(self._unescape, text)\n",
         "    def unescape(self, text: str) -> str:\n        if util.STX not in text:\n            return text\n"
         "        return self.RE.sub(self._unescape, text)\n"),)),
    # a repeated leaf's elements copied by hand (texts are immutable, shared), not by deepcopy's generic walk
    "copy-by-hand": (TREE, (
        ("import copy\nimport re\n", "import re\n"),
        ("            child.extend(copy.deepcopy(sub) for sub in model)\n",
         "            child.extend(_copied(sub) for sub in model)\n"),
        ("class InlineProcessor(Treeprocessor):\n",
         "def _copied(element: etree.Element) -> etree.Element:\n"
         "    \"\"\"A copy of `element` and its subtree.\"\"\"\n"
         "    copy_ = etree.Element(element.tag, dict(element.attrib))\n"
         "    copy_.text, copy_.tail = element.text, element.tail\n"
         "    copy_.extend(_copied(sub) for sub in element)\n    return copy_\n\n\n"
         "class InlineProcessor(Treeprocessor):\n"))),
    # a one-line block starting with a letter can only be a paragraph when every block processor is a built-in
    # one (no built-in test can match it): it goes to the paragraph processor without the others' tests
    "plain-line": (PARSER, (
        ("        while blocks:\n            for processor in self.blockprocessors:\n",
         "        while blocks:\n            if self.__plain(blocks[0]):\n"
         "                self.blockprocessors['paragraph'].run(parent, blocks)\n                continue\n"
         "            for processor in self.blockprocessors:\n"),
        ("    def parseDocument(self, lines",
         "    def __plain(self, block: str) -> bool:\n"
         "        \"\"\"Whether `block` can only be a paragraph: one line starting with a letter, every processor a\n"
         "        built-in one (an extension's could claim it).\"\"\"\n"
         "        if '\\n' in block or not block[:1].isalpha():\n            return False\n"
         "        if getattr(self, '_builtin', None) is None or self._builtin[0] != len(self.blockprocessors):\n"
         "            from . import blockprocessors\n"
         "            self._builtin = (len(self.blockprocessors), all(\n"
         "                type(p).__module__ == blockprocessors.__name__ for p in self.blockprocessors))\n"
         "        return self._builtin[1]\n\n"
         "    def parseDocument(self, lines"))),
    # a document with no tag and no reference has nothing for the HTML extractor to take out
    "no-markup-no-parse": ("markdown/preprocessors.py", (
        ("        source = '\\n'.join(lines)\n        parser = HTMLExtractor(self.md)\n",
         "        source = '\\n'.join(lines)\n        if '<' not in source and '&' not in source:\n"
         "            return source.split('\\n')\n        parser = HTMLExtractor(self.md)\n"),)),
    # whether a tag is block-level asked once per tag in a prettify pass (the list of such tags holds still in it)
    "prettify-known": (TREE, (
        ("        i = \"\\n\"\n        if self.md.is_block_level(elem.tag) and elem.tag not in ['code', 'pre']:\n"
         "            if (not elem.text or not elem.text.strip()) \\\n"
         "                    and len(elem) and self.md.is_block_level(elem[0].tag):\n"
         "                elem.text = i\n            for e in elem:\n"
         "                if self.md.is_block_level(e.tag):\n",
         "        i = \"\\n\"\n        if self._block(elem.tag) and elem.tag not in ['code', 'pre']:\n"
         "            if (not elem.text or not elem.text.strip()) \\\n"
         "                    and len(elem) and self._block(elem[0].tag):\n"
         "                elem.text = i\n            for e in elem:\n                if self._block(e.tag):\n"),
        ("    def run(self, root: etree.Element) -> None:\n        \"\"\" Add line breaks to `Element` object and its "
         "children. \"\"\"\n\n        self._prettifyETree(root)\n",
         "    def _block(self, tag: Any) -> bool:\n"
         "        \"\"\"Whether `tag` is block-level, asked once per tag in a run.\"\"\"\n"
         "        known = self.__dict__.setdefault('_known', {})\n"
         "        if tag not in known:\n            known[tag] = self.md.is_block_level(tag)\n"
         "        return known[tag]\n\n"
         "    def run(self, root: etree.Element) -> None:\n        \"\"\" Add line breaks to `Element` object and its "
         "children. \"\"\"\n\n        self._known = {}\n        self._prettifyETree(root)\n"))),
}
REWRITE = ("lazy-yaml", "inline-prefilter", "repeated-inline", *FASTER)


# test_large_win_pypi's document, and its target's build: the venv reaches the interpreter's packages (PyYAML for
# Markdown's tests) as a plain path, not as `--system-site-packages`: this machine's interpreter holds a `.pth` of
# its sandboxing (an egress proxy's CA added to certifi) that imports certifi at every start, 40 ms of CPU no user's
# machine spends; in a site directory it runs, on a plain path it does not
LARGE_SECTIONS = 480
LARGE_BUILD = ("python3 -m venv --without-pip .venv && "
               "packages=$(python3 -c \"import sysconfig; print(sysconfig.get_paths()['purelib'])\") && "
               "printf '%s\\n%s\\n' \"$PWD\" \"$packages\" "
               "> \"$(echo .venv/lib/python3*/site-packages)/markdown-dev.pth\" "
               "&& .venv/bin/python -c 'import markdown'")


def fetch(tmp_path: Path) -> Path:
    """Python-Markdown's sdist, unpacked and committed (skipped when PyPI cannot be reached: the patches edit its
    modules, so no stand-in would do)."""
    project = pypi_sdist(tmp_path, PACKAGE, "markdown", tmp_path / "markdown-project")
    if project is None:
        pytest.skip(f"PyPI is unreachable: pip could not download {PACKAGE}")
    (project / ".gitignore").write_text(".venv/\n__pycache__/\nmarkdown/_precomputed.py\nmarkdown/.c/\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "Python-Markdown as released")
    return project


def edited(project: Path, *names: str) -> dict[str, str]:
    """The whole new text of each file the named wins (HONEST's, FASTER's) edit, applied in order."""
    texts: dict[str, str] = {}
    for name in names:
        path, edits = HONEST[name][1:] if name in HONEST else FASTER[name]
        text = texts.get(path) or (project / path).read_text()
        for old, new in edits:
            assert old in text, (name, old)
            text = text.replace(old, new, 1)
        texts[path] = text
    return texts


def diff(project: Path, edits: Mapping[str, str | None]) -> str:
    """The patch of `edits` (a file's whole new text, or None to delete it), made by git in a scratch clone."""
    scratch = project.parent / "scratch"
    git(project.parent, "clone", "-q", str(project), str(scratch))
    for name, text in edits.items():
        if text is None:
            (scratch / name).unlink()
        else:
            (scratch / name).write_text(text)
    git(scratch, "add", "-A")
    patch = git(scratch, "diff", "--cached")
    subprocess.run(["rm", "-rf", str(scratch)], check=True)
    return patch


def run_lab(tmp_path: Path, project: Path, bench: Path, timeout_s: float) -> list[ExperimentRecord]:
    """`orchard init`, `backlog add` and `run` as a user types them (tmp_path holds orchard.toml and
    hypotheses.toml), each exiting 0; the lab's experiments, oldest first."""
    workspace = tmp_path / "lab"
    for step in (("init", workspace, "--target", project, "--bench", bench, "--config", tmp_path / "orchard.toml"),
                 ("backlog", "add", workspace, "--file", tmp_path / "hypotheses.toml"), ("run", workspace)):
        done = subprocess.run([sys.executable, "-m", "orchard", *map(str, step)], capture_output=True, text=True,
                              timeout=timeout_s, cwd=tmp_path, check=False)
        assert done.returncode == 0, (step[0], done.stdout[-4000:] + done.stderr[-4000:])
    state = LabState.open(workspace)
    try:
        return state.experiments()
    finally:
        state.close()
