"""A worker's log shown as what its agent did. The logs under data/agent-logs/ are what the real CLIs printed
(Claude Code 2.1.332 `-p --output-format stream-json --verbose`, Codex 0.171.0 `exec --json`) against the
scripted endpoint of tests/agents, with the flags the launchers give them: a shell command, a failing tool, a
last message."""

from __future__ import annotations

from pathlib import Path

from orchard.lab.notebook.agent_log import LogItem, LogItemKind, log_html, read_log

LOGS = Path(__file__).parent / "data" / "agent-logs"
WRITE = """/bin/bash -lc "printf 'shorter\\\\n' > note.txt && cat note.txt\""""  # the command as Codex ran it


def _kinds(items: list[LogItem]) -> list[tuple[LogItemKind, str]]:
    return [(i.kind, i.title) for i in items]


def test_claude_stream_json_reads_as_messages_tool_calls_results_and_the_final_result() -> None:
    items = read_log((LOGS / "claude-2.1.332-stream-json.log").read_text().splitlines())
    assert _kinds(items) == [
        (LogItemKind.SESSION, "session: model claude-opus-5-5"),
        (LogItemKind.MESSAGE, "assistant"),
        (LogItemKind.TOOL_CALL, "Bash printf 'shorter\\n' > note.txt && cat note.txt"),
        (LogItemKind.TOOL_RESULT, "tool result"),
        (LogItemKind.TOOL_CALL, "Read /nonexistent/file.txt"),
        (LogItemKind.TOOL_RESULT, "tool error"),
        (LogItemKind.MESSAGE, "assistant"),
        (LogItemKind.RESULT, "result: success · cost $0.0668 · 3 turns · 10.7 s"),
    ]
    assert items[1].body == "I will look at the file first."
    assert items[3].body == "shorter" and not items[3].error
    assert items[5].error and items[5].body.startswith("File does not exist.")
    assert items[2].body == "description: write the note"
    assert items[-1].body == "Done: note.txt holds the shorter text."


def test_a_claude_workers_whole_log_has_its_tools_in_order_and_its_background_task() -> None:
    """The log of the real claude worker of test_browser's lab (demo target, longest-word-one-pass)."""
    items = read_log((LOGS / "claude-2.1.332-demo-worker.log").read_text().splitlines())
    calls = [i.title.split()[0] for i in items if i.kind == LogItemKind.TOOL_CALL]
    assert calls == ["Read", "Edit", "Bash", "Write"]
    assert [i.title for i in items if i.kind == LogItemKind.SESSION][1:] == [
        "task_started: build and test", "task_notification: build and test (failed)"]
    # the agent's last word, its result, then the line orchard's wrapper adds (kept as text)
    assert [i.kind for i in items][-3:] == [LogItemKind.MESSAGE, LogItemKind.RESULT, LogItemKind.OUTPUT]
    assert not items[-2].error and items[-1].body == "WORKER_DONE_0"


def test_codex_exec_json_reads_as_shell_calls_their_exits_and_the_message() -> None:
    items = read_log((LOGS / "codex-0.171.0-exec-json.log").read_text().splitlines())
    assert _kinds(items) == [
        (LogItemKind.OUTPUT, "output"),  # its warnings before the first event, kept as text
        (LogItemKind.TOOL_CALL, f"shell {WRITE}"),
        (LogItemKind.TOOL_RESULT, f"shell exited 0: {WRITE}"),
        (LogItemKind.TOOL_CALL, "shell /bin/bash -lc 'ls no-such-file'"),
        (LogItemKind.TOOL_RESULT, "shell exited 2: /bin/bash -lc 'ls no-such-file'"),
        (LogItemKind.MESSAGE, "assistant"),
        (LogItemKind.RESULT, "turn completed: 16,100 tokens in, 120 out"),
    ]
    assert "Reading additional input from stdin" in items[0].body
    assert items[4].error and "No such file or directory" in items[4].body and not items[2].error
    assert items[5].body == "Done: note.txt holds the shorter text."


def test_plain_output_and_foreign_json_stay_text_and_everything_is_escaped() -> None:
    lines = ["aider v0.86.2", "Applied edit to src/alpha.txt", '{"level": "info", "msg": "not an agent event"}',
             '{"type":"item.completed","item":{"type":"agent_message","text":"<script>x</script>"}}', "WORKER_DONE_0"]
    items = read_log(lines)
    assert [i.kind for i in items] == [LogItemKind.OUTPUT, LogItemKind.MESSAGE, LogItemKind.OUTPUT]
    assert items[0].body == "\n".join(lines[:3])
    html = log_html(items)
    assert "<script>x" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
