import contextlib
import io
import os
import tempfile
import unittest

from wordfreq.cli import main


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


class CliTest(unittest.TestCase):
    def setUp(self):
        handle, self.path = tempfile.mkstemp(suffix=".txt")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write("The cat and the dog.\nThe dog's bone, the end.\n")
        self.addCleanup(os.unlink, self.path)

    def test_report_has_totals_and_ranked_words(self):
        code, out, _ = run(self.path)
        self.assertEqual(code, 0)
        self.assertIn("words: 10", out)
        self.assertIn("unique words: 7", out)
        self.assertLess(out.index("the 4"), out.index("and 1"))

    def test_top_limits_the_listed_words(self):
        code, out, _ = run("--top", "1", self.path)
        self.assertEqual(code, 0)
        self.assertIn("the 4", out)
        self.assertNotIn("cat 1", out)

    def test_missing_file_is_exit_2_with_a_message(self):
        code, _, err = run(self.path + ".missing")
        self.assertEqual(code, 2)
        self.assertIn("cannot read", err)

    def test_bad_arguments_are_exit_2_with_usage(self):
        for argv in (["--top", "zero", self.path], ["--top"], [], ["--colour", self.path], ["a", "b"]):
            code, _, err = run(*argv)
            self.assertEqual(code, 2, argv)
            self.assertIn("usage: wordfreq", err)


if __name__ == "__main__":
    unittest.main()
