"""Command line: `wordfreq [--top N] FILE`.

Arguments are parsed by hand: the report runs in a few tens of milliseconds
and importing argparse would be a visible part of that.
"""

import os
import sys

from wordfreq import __version__
from wordfreq.count import count_words, ranked
from wordfreq.reader import read_lines
from wordfreq.report import render
from wordfreq.stats import summary
from wordfreq.tokenize import tokenize

DEFAULT_TOP = 20
USAGE = "usage: wordfreq [--top N] FILE"


class UsageError(Exception):
    """Bad command line; the message says what is wrong."""


def parse_args(argv):
    """(file, top) from the arguments, or UsageError."""
    top = DEFAULT_TOP
    files = []
    arguments = list(argv)
    while arguments:
        argument = arguments.pop(0)
        if argument == "--top":
            if not arguments:
                raise UsageError("--top needs a number")
            value = arguments.pop(0)
            if not value.isdigit() or int(value) < 1:
                raise UsageError(f"--top must be a whole number of at least 1, not {value!r}")
            top = int(value)
        elif argument.startswith("-") and argument != "-":
            raise UsageError(f"unknown option {argument}")
        else:
            files.append(argument)
    if len(files) != 1:
        raise UsageError("give exactly one FILE")
    return files[0], top


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["--help"], ["-h"]):
        print(USAGE)
        return 0
    if argv == ["--version"]:
        print(f"wordfreq {__version__}")
        return 0
    try:
        path, top = parse_args(argv)
        lines = read_lines(path)
    except UsageError as error:
        print(f"wordfreq: {error}\n{USAGE}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"wordfreq: cannot read {path}: {error.strerror}", file=sys.stderr)
        return 2
    per_line = [tokenize(line) for line in lines]
    words = [word for line_words in per_line for word in line_words]
    counts = count_words(words)
    report = render(
        source=os.path.basename(path),
        summary=summary(lines, words, counts),
        top=ranked(counts)[:top],
        total_words=len(words),
        words_per_line=[len(line_words) for line_words in per_line],
    )
    for line in report:
        print(line)
    return 0
