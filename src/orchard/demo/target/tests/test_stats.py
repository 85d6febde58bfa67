import unittest

from wordfreq.stats import longest_word, summary


class StatsTest(unittest.TestCase):
    def test_longest_word(self):
        self.assertEqual(longest_word([("a", 3), ("banana", 1), ("kiwi", 2)]), "banana")

    def test_longest_word_ties_break_alphabetically(self):
        self.assertEqual(longest_word([("pear", 1), ("kiwi", 4), ("figs", 2)]), "figs")

    def test_longest_word_of_nothing_is_empty(self):
        self.assertEqual(longest_word([]), "")

    def test_summary_figures(self):
        lines = ["a bb", "ccc"]
        words = ["a", "bb", "ccc", "bb"]
        counts = [("a", 1), ("bb", 2), ("ccc", 1)]
        self.assertEqual(
            summary(lines, words, counts),
            [
                ("lines", "2"),
                ("words", "4"),
                ("unique words", "3"),
                ("average word length", "2.00"),
                ("longest word", "ccc"),
            ],
        )

    def test_summary_of_an_empty_file(self):
        self.assertEqual(dict(summary([], [], []))["average word length"], "0.00")


if __name__ == "__main__":
    unittest.main()
