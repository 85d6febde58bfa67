"""Counting words."""


def count_words(words):
    """(word, count) for each distinct word, in order of first appearance."""
    distinct = []
    for word in words:
        if word not in distinct:
            distinct.append(word)
    return [(word, words.count(word)) for word in distinct]


def ranked(counts):
    """Most frequent first; equal counts in alphabetical order."""
    return sorted(counts, key=lambda pair: (-pair[1], pair[0]))
