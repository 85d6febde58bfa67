"""Python-Markdown from PyPI as a lab's target (the red-team battery's, and the variants' cost benchmark's): its
build, the suite a user writes for it, the document it renders, and honest wins of different sizes on that suite.

The suite renders one fixture document with the CLI (`python -m markdown`), a recall gate on a few headings
(`expect_file`), no held-out scenario.
"""

from __future__ import annotations

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


def handbook() -> str:
    """The user's document: 120 sections of a heading, a paragraph with a hard line break, then blocks every section
    repeats (a list, opening hours line by line, a code block, a rule, a quote), as a handbook's boilerplate does."""
    parts = ["# The handbook\n"]
    for n in range(1, 121):
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
