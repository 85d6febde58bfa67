import os
import tempfile
import unittest

from wordfreq.reader import read_lines


class ReaderTest(unittest.TestCase):
    def read(self, data):
        handle, path = tempfile.mkstemp()
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        self.addCleanup(os.unlink, path)
        return read_lines(path)

    def test_lines_without_endings(self):
        self.assertEqual(self.read(b"one\ntwo\n"), ["one", "two"])

    def test_windows_line_endings_and_a_last_line_without_newline(self):
        self.assertEqual(self.read(b"one\r\ntwo"), ["one", "two"])

    def test_undecodable_bytes_are_replaced_not_fatal(self):
        self.assertEqual(self.read(b"caf\xe9\n"), ["caf\ufffd"])

    def test_empty_file_has_no_lines(self):
        self.assertEqual(self.read(b""), [])


if __name__ == "__main__":
    unittest.main()
