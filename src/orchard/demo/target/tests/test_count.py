import unittest

from wordfreq.count import count_words, ranked


class CountTest(unittest.TestCase):
    def test_counts_each_distinct_word_in_first_seen_order(self):
        words = ["b", "a", "b", "c", "b", "a"]
        self.assertEqual(count_words(words), [("b", 3), ("a", 2), ("c", 1)])

    def test_no_words_no_counts(self):
        self.assertEqual(count_words([]), [])

    def test_counts_add_up_to_the_number_of_words(self):
        words = ("one two three two three three " * 50).split()
        self.assertEqual(sum(count for _, count in count_words(words)), len(words))

    def test_ranked_is_most_frequent_first_and_alphabetical_on_ties(self):
        counts = [("pear", 2), ("fig", 5), ("apple", 2), ("kiwi", 1)]
        self.assertEqual(ranked(counts), [("fig", 5), ("apple", 2), ("pear", 2), ("kiwi", 1)])


if __name__ == "__main__":
    unittest.main()
