"""Reading the input file."""


def read_lines(path):
    """The file's lines, without line endings. Undecodable bytes are replaced."""
    lines = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            lines.append(line.rstrip("\n").rstrip("\r"))
    return lines
