"""Rendering the report.

Every line is padded to the full terminal width so the columns line up when
the report is pasted next to other reports, the table header is repeated
every few rows for long tables, and a per-line breakdown follows the table
for debugging the tokenizer.
"""

WIDTH = 80
HEADER_EVERY = 5


def _rule(char="="):
    return char * WIDTH


def _pad(text):
    return text.ljust(WIDTH)


def _table_header():
    return [_pad("rank  word and count         share"), _rule("-")]


def render(source, summary, top, total_words, words_per_line):
    """The report as a list of lines.

    `summary` is (label, value) pairs, `top` the ranked (word, count) pairs to
    show, `words_per_line` the number of words on each input line.
    """
    lines = [_rule(), _pad("WORD FREQUENCY REPORT"), _rule(), _pad(f"source: {source}")]
    for label, value in summary:
        lines.append(_pad(f"{label}: {value}"))
    lines.append(_rule())
    for rank, (word, count) in enumerate(top, start=1):
        if (rank - 1) % HEADER_EVERY == 0:
            lines.extend(_table_header())
        share = 100.0 * count / total_words if total_words else 0.0
        lines.append(_pad(f"{rank:>4}. {word} {count} ({share:.2f}%)"))
    lines.append(_rule())
    lines.append(_pad("debug: words per input line"))
    lines.append(_rule("-"))
    for number, count in enumerate(words_per_line, start=1):
        lines.append(_pad(f"line {number}: {count} words"))
    lines.append(_rule())
    return lines
