"""What to measure, read from files: suites, flows, subjects, other tools' results."""
