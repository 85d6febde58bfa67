"""Splitting text into words.

A word is a run of letters and digits, lowercased; an apostrophe between two
such characters belongs to the word ("don't"), any other character ends it.
"""


def _is_word_char(ch):
    return ch.isalpha() or ch.isdigit()


def tokenize(text):
    """The words of `text`, in order."""
    words = []
    current = ""
    for index, ch in enumerate(text):
        if _is_word_char(ch):
            current += ch.lower()
        elif (
            ch == "'"
            and current
            and index + 1 < len(text)
            and _is_word_char(text[index + 1])
        ):
            current += ch
        else:
            if current:
                words.append(current)
            current = ""
    if current:
        words.append(current)
    return words
