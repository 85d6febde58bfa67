"""wordfreq: a word-frequency report for a text file."""

__version__ = "1.0.0"
