"""Log lines as written: the lab's timestamped lines quote config keys and workers' words, never rich markup."""

from __future__ import annotations

import pytest

from orchard.cli.output import ProgressBar


def test_a_log_line_with_brackets_is_printed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressBar() as bar:
        bar.say('UNSANDBOXED: workers run without bubblewrap ([workers] sandbox = "none")')
        bar.say("a worker's report said [/x] and [red]")
        bar.update(0, 4, note="pair order seed 7 [warm-up]")
    err = capsys.readouterr().err
    assert '([workers] sandbox = "none")' in err, err
    assert "a worker's report said [/x] and [red]" in err, err
    assert "pair order seed 7 [warm-up]" in err, err
