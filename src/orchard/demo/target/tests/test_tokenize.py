import unittest

from wordfreq.tokenize import tokenize


class TokenizeTest(unittest.TestCase):
    def test_lowercases_and_splits_on_spaces_and_punctuation(self):
        self.assertEqual(tokenize("The cat, the HAT. Sat!"), ["the", "cat", "the", "hat", "sat"])

    def test_apostrophe_inside_a_word_is_kept(self):
        self.assertEqual(tokenize("Don't stop; it's late"), ["don't", "stop", "it's", "late"])

    def test_quotes_around_a_word_are_not_part_of_it(self):
        self.assertEqual(tokenize("'quoted' \"twice\" dogs'"), ["quoted", "twice", "dogs"])

    def test_digits_are_word_characters(self):
        self.assertEqual(tokenize("error 404 at line42"), ["error", "404", "at", "line42"])

    def test_accented_letters_are_word_characters(self):
        self.assertEqual(tokenize("Café naïve résumé"), ["café", "naïve", "résumé"])

    def test_empty_and_blank_text_have_no_words(self):
        self.assertEqual(tokenize(""), [])
        self.assertEqual(tokenize("  ,.;  "), [])


if __name__ == "__main__":
    unittest.main()
