import unittest

from wordfreq.report import render

SUMMARY = [("lines", "3"), ("words", "10"), ("unique words", "3"), ("longest word", "apple")]
TOP = [("apple", 5), ("fig", 3), ("kiwi", 2)]


def report_text(top=TOP):
    return "\n".join(render("fruit.txt", SUMMARY, top, total_words=10, words_per_line=[4, 4, 2]))


class ReportTest(unittest.TestCase):
    def test_names_the_source_file(self):
        self.assertIn("fruit.txt", report_text())

    def test_every_summary_figure_is_shown(self):
        text = report_text()
        for label, value in SUMMARY:
            self.assertIn(f"{label}: {value}", text)

    def test_top_words_are_listed_with_counts_and_shares_in_rank_order(self):
        text = report_text()
        positions = [text.index(f"{word} {count} ({100 * count / 10:.2f}%)") for word, count in TOP]
        self.assertEqual(positions, sorted(positions))

    def test_only_the_words_given_are_listed(self):
        text = report_text(top=TOP[:1])
        self.assertIn("apple 5", text)
        self.assertNotIn("fig 3", text)

    def test_no_line_ends_with_a_newline_character(self):
        self.assertTrue(all("\n" not in line for line in render("f", SUMMARY, TOP, 10, [10])))


if __name__ == "__main__":
    unittest.main()
