"""Summary figures for the report header."""


def longest_word(counts):
    """The longest distinct word; among equally long ones, the alphabetically first."""
    if not counts:
        return ""
    by_length = sorted((word for word, _ in counts), key=lambda word: (-len(word), word))
    return by_length[0]


def summary(lines, words, counts):
    """Totals for the header, as (label, value) pairs in display order."""
    total = len(words)
    average = sum(len(word) for word in words) / total if total else 0.0
    return [
        ("lines", str(len(lines))),
        ("words", str(total)),
        ("unique words", str(len(counts))),
        ("average word length", f"{average:.2f}"),
        ("longest word", longest_word(counts)),
    ]
