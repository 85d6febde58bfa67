"""The harness checks itself: the suite parses, and every expected fact is true.

The facts under `expect` are what the information_recall gate demands of
every candidate, so a wrong fact would fail every build. They are checked
here against an independent count of the generated corpus.
"""

import collections
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import unittest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = os.path.join(BENCH, "suite.toml")
WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")  # the corpus is ASCII


def load_suite():
    with open(SUITE, "rb") as handle:
        return tomllib.load(handle)


def facts(scenario):
    """A scenario's expected facts: listed under `expect`, or one a line in its `expect_file`."""
    if "expect_file" not in scenario:
        return scenario["expect"]
    with open(os.path.join(BENCH, scenario["expect_file"]), encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def generate(fixture, directory):
    """Run a fixture's command as the suite would, into `directory`."""
    command = [
        part.format(suite_dir=BENCH, dir=directory) for part in fixture["command"]
    ]
    if command[0] == "python3":
        command[0] = sys.executable
    subprocess.run(command, check=True)
    return os.path.join(directory, "corpus.txt")


def reference_figures(path):
    """Totals and counts computed without the program under test."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    words = WORD.findall(text.lower())
    counts = collections.Counter(words)
    longest = min(counts, key=lambda word: (-len(word), word))
    summary = {
        "lines": str(len(text.splitlines())),
        "words": str(len(words)),
        "unique words": str(len(counts)),
        "average word length": f"{sum(map(len, words)) / len(words):.2f}",
        "longest word": longest,
    }
    return summary, counts, len(words)


class SuiteTest(unittest.TestCase):
    def setUp(self):
        self.suite = load_suite()
        self.fixtures = {f["name"]: f for f in self.suite["fixture"]}
        self.scenarios = {s["name"]: s for s in self.suite["scenario"]}

    def test_scenarios_metrics_and_gates(self):
        self.assertEqual(sorted(self.scenarios), ["report", "top5", "unseen"])
        held_out = sorted(s["name"] for s in self.suite["scenario"] if s.get("holdout"))
        self.assertEqual(held_out, ["unseen"])
        metrics = {m["name"]: m for m in self.suite["metric"]}
        self.assertEqual(sorted(metrics), ["cpu_ms", "stdout_bytes", "wall_ms"])
        self.assertGreaterEqual(metrics["wall_ms"]["floor"], 0.03)
        self.assertEqual(
            sorted(g["kind"] for g in self.suite["gate"]), ["determinism", "information_recall"]
        )

    def test_every_scenario_runs_the_binary_on_a_fixture_and_expects_facts(self):
        for name, scenario in self.scenarios.items():
            self.assertEqual(scenario["command"][0], "{bin}", name)
            used = re.findall(r"\{fixture\.(\w+)\}", " ".join(scenario["command"]))
            self.assertTrue(used and set(used) <= set(self.fixtures), name)
            self.assertTrue(facts(scenario), name)

    def test_the_corpus_generator_is_deterministic(self):
        with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
            fixture = self.fixtures["small"]
            with open(generate(fixture, one), "rb") as a, open(generate(fixture, two), "rb") as b:
                self.assertEqual(a.read(), b.read())

    def test_expected_facts_are_true_of_the_generated_corpus(self):
        for name, scenario in self.scenarios.items():
            fixture = re.search(r"\{fixture\.(\w+)\}", " ".join(scenario["command"])).group(1)
            with tempfile.TemporaryDirectory() as directory:
                summary, counts, total = reference_figures(generate(self.fixtures[fixture], directory))
            for fact in facts(scenario):
                with self.subTest(scenario=name, fact=fact):
                    label, colon, value = fact.partition(": ")
                    if colon:
                        self.assertEqual(summary[label], value)
                        continue
                    match = re.fullmatch(r"(\S+) (\d+)(?: \((\d+\.\d\d)%\))?", fact)
                    self.assertIsNotNone(match, "a fact is 'label: value' or 'word count [(share%)]'")
                    word, count, share = match.groups()
                    self.assertEqual(counts[word], int(count))
                    if share:
                        self.assertEqual(f"{100 * int(count) / total:.2f}", share)


if __name__ == "__main__":
    unittest.main()
