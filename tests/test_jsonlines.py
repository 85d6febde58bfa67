"""The one JSON-lines scanner: lenient over mixed output, strict over orchard's own row files."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchard.jsonlines import json_objects, last_json_object, read_jsonl


def test_mixed_output_keeps_only_the_json_objects_in_order() -> None:
    text = 'starting\n{"a": 1}\n[1, 2]\n{"b": 2\n  {"c": 3}  \n\n"text"\n'
    assert json_objects(text) == [{"a": 1}, {"c": 3}]
    assert json_objects(text.splitlines()) == [{"a": 1}, {"c": 3}]


def test_the_last_object_is_the_answer_and_a_key_picks_among_them() -> None:
    text = '{"verdict": "REGRESSED"}\nlog\n{"verdict": "PASS", "n": 6}\n{"progress": 1}\nPASS\n'
    assert last_json_object(text) == {"progress": 1}
    assert last_json_object(text, key="verdict") == {"verdict": "PASS", "n": 6}
    assert last_json_object(text, key="gates") is None
    assert last_json_object("no JSON here\n[1]\n") is None


def test_a_row_file_with_a_broken_line_is_an_error_naming_the_line(tmp_path: Path) -> None:
    rows = tmp_path / "run.jsonl"
    rows.write_text('{"run": 1}\n\n{"run": 2}\n')
    assert read_jsonl(rows) == [{"run": 1}, {"run": 2}]
    rows.write_text('{"run": 1}\n{"run": \n')
    with pytest.raises(ValueError, match=r"run\.jsonl line 2 is not JSON"):
        read_jsonl(rows)
    rows.write_text('{"run": 1}\n[1]\n')
    with pytest.raises(ValueError, match=r"run\.jsonl line 2 is not a JSON object"):
        read_jsonl(rows)
