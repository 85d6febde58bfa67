"""Interrupted publication against git: a fixture that reads a whole push and hangs up."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchard.bench.lanes import pushwire
from orchard.bench.sandbox.environment import isolated_env
from tests.bench.lanes_support import LaneEnv, invoke, latest_rows, totals, without_oak_on_path

SCENARIO = "interrupted_publication_after_request_v1"
ZERO = "0" * 40


def test_git_push_is_cut_after_a_complete_request(lane_env: LaneEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    without_oak_on_path(monkeypatch)
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        "git,oak",
        "--runs",
        "1",
        "--scenarios",
        SCENARIO,
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop")
    (total,) = totals(rows, "interrupted_publication.total")
    # What the CLI claimed ...
    assert total["cli_returncode"] not in (0, None)
    assert total["publication_outcome"] == "failed"
    assert "hung up" in total["cli_stderr_tail"]
    # ... apart from what the fixture saw.
    assert total["fixture_delivery_state"] == "complete_request_observed"
    assert total["fixture_received_complete_request_before_disconnect"] is True
    assert total["mutation_requests_observed"] == 1 and total["blind_replay_requests"] == 0
    assert total["network_request_bytes_observed"] > 100
    assert total["fixture_pack_objects"] == 3  # commit, tree, blob of the one edit
    (command,) = total["fixture_request_commands"]
    assert command.endswith("refs/heads/main") and command.split()[1] == total["local_head_after"]
    assert total["fixture_remote_ref_unchanged"] is True
    assert (
        total["local_head_preserved"] and total["worktree_payload_preserved"] and total["unpublished_state_preserved"]
    )
    assert total["remote_transport"] == "loopback_fault_fixture"
    assert total["returncode"] == 0
    attempt = next(r for r in rows if r["operation"] == "publication.attempt")
    assert attempt["returncode"] == 0 and attempt["process_returncode"] != 0  # failing was the expected outcome
    oak = [r for r in rows if r["subject"] == "oak"]
    assert len(oak) == 1 and oak[0]["returncode"] == 77
    assert "CLI claim" in result.output and "Fixture saw" in result.output
    assert lane_env.leftovers() == []


def test_a_cli_that_retries_blindly_fails_the_row(lane_env: LaneEnv) -> None:
    retry = lane_env.wrapper(
        "retry-git", 'if [ "$1" = push ]; then git "$@" || exec git "$@"; exit 0; fi\nexec git "$@"\n'
    )
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        f"retry:git={retry}",
        "--runs",
        "1",
        "--scenarios",
        SCENARIO,
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 1
    (total,) = totals(latest_rows(lane_env.results, "task-loop"), "interrupted_publication.total")
    assert total["mutation_requests_observed"] == 2 and total["blind_replay_requests"] == 1
    assert total["returncode"] == 1 and "blind replay" in total["failure_reason"]


def test_a_cli_that_claims_success_fails_the_row(lane_env: LaneEnv) -> None:
    liar = lane_env.wrapper("liar-git", 'if [ "$1" = push ]; then git "$@"; exit 0; fi\nexec git "$@"\n')
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        f"liar:git={liar}",
        "--runs",
        "1",
        "--scenarios",
        SCENARIO,
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 1
    (total,) = totals(latest_rows(lane_env.results, "task-loop"), "interrupted_publication.total")
    assert (
        total["publication_outcome"] == "published" and total["fixture_delivery_state"] == "complete_request_observed"
    )
    assert "did not end with a failure" in total["failure_reason"]


def _pkt(text: bytes) -> bytes:
    return b"%04x" % (len(text) + 4) + text


@pytest.fixture
def real_push(tmp_path: Path) -> tuple[bytes, int]:
    """A receive-pack request body built from a real git pack: (body, pack start)."""
    env = isolated_env()
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    (repo / "a.txt").write_text("hello\n" * 50)
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "one"], cwd=repo, check=True, env=env)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, env=env, capture_output=True, text=True
    ).stdout.strip()
    pack = subprocess.run(
        ["git", "pack-objects", "--stdout", "--revs"],
        cwd=repo,
        input=b"HEAD\n",
        check=True,
        env=env,
        capture_output=True,
    ).stdout
    commands = _pkt(f"{ZERO} {head} refs/heads/main\0 report-status side-band-64k\n".encode()) + b"0000"
    return commands + pack, len(commands)


def test_pushwire_complete_partial_invalid(real_push: tuple[bytes, int]) -> None:
    body, start = real_push
    complete = pushwire.parse_push(body)
    assert complete.state == "complete" and complete.pack_objects == 3 and complete.pack_bytes == len(body) - start
    assert complete.commands[0].endswith("refs/heads/main")
    for cut in (2, start - 1, start + 8, len(body) - 21, len(body) - 1):
        assert pushwire.parse_push(body[:cut]).state == "partial", cut
    corrupt = body[:-1] + bytes([body[-1] ^ 0xFF])
    assert pushwire.parse_push(corrupt).state == "invalid"
    assert pushwire.parse_push(b"zzzz").state == "invalid"
    assert pushwire.parse_push(body[:start] + b"JUNK" + body[start + 4 :]).state == "invalid"


def test_pushwire_delete_only_and_service_line() -> None:
    delete = _pkt(f"{'1' * 40} {ZERO} refs/heads/gone\0 report-status\n".encode()) + b"0000"
    assert pushwire.parse_push(delete).state == "complete"
    assert pushwire.parse_push(b"0000").state == "complete"  # nothing to update
    line = _pkt(b"git-receive-pack /r.git\0host=127.0.0.1\0")
    assert pushwire.service_request(line + b"rest") == ("git-receive-pack /r.git", len(line))
    assert pushwire.service_request(line[:5]) is None
