"""The scripted model endpoint on its own: what a CLI would get for each kind of script step."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any

from tests.agents.endpoint import ScriptedEndpoint

Start = Callable[[str], ScriptedEndpoint]


def _post(server: ScriptedEndpoint, body: dict[str, Any], timeout: float = 30) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    connection.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json"})
    return connection.getresponse()


def _messages(*texts: str, tool_result: str | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": texts[0]}]}]
    if tool_result is not None:
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                   "content": tool_result}]}]
    return {"model": "claude-test", "max_tokens": 100, "system": "you are a test",
            "tools": [{"name": "Read"}, {"name": "Write"}], "messages": messages}


def test_a_script_answers_with_tool_calls_filled_from_the_prompt_and_logs_every_request(endpoint: Start) -> None:
    server = endpoint("endpoint-selftest.toml")
    prompt = "alpha first, then write the report to `/w/.orchard-report.json`"
    first = json.loads(_post(server, _messages(prompt)).read())
    assert first["stop_reason"] == "tool_use"
    assert first["content"] == [{"type": "tool_use", "id": first["content"][0]["id"], "name": "Read",
                                 "input": {"file_path": "/src/alpha.txt"}}]
    second = json.loads(_post(server, _messages(prompt, tool_result="alpha 1\n")).read())
    assert second["content"][0]["input"] == {"file_path": "/w/.orchard-report.json", "content": '{"status": "done"}'}
    unmatched = json.loads(_post(server, _messages("something else")).read())
    assert unmatched["stop_reason"] == "end_turn" and "no scripted step" in unmatched["content"][0]["text"]
    logged = server.requests()
    assert [(r.step, r.status) for r in logged] == [("read", 200), ("write-report", 200), (None, 200)]
    assert logged[0].asked is not None and logged[0].asked.tools == ("Read", "Write")
    assert logged[0].asked.system == "you are a test" and logged[0].captures["who"] == "alpha"
    assert logged[1].asked is not None and logged[1].asked.turn == 2 and logged[1].asked.tool_result == "alpha 1\n"


def test_a_stream_is_the_messages_event_sequence(endpoint: Start) -> None:
    server = endpoint("endpoint-selftest.toml")
    response = _post(server, {**_messages("beta first; report to `/r`"), "stream": True})
    assert response.getheader("content-type") == "text/event-stream"
    events = [line.split(": ", 1)[1] for line in response.read().decode().splitlines() if line.startswith("event: ")]
    assert events == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                      "message_delta", "message_stop"]


def test_an_error_step_answers_with_its_status_and_the_api_error_body(endpoint: Start) -> None:
    server = endpoint("endpoint-selftest.toml")
    response = _post(server, _messages("please rate limit me"))
    assert response.status == 429
    assert json.loads(response.read())["error"] == {
        "type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}
    missing = _post(server, _messages("use a missing value"))
    assert missing.status == 500 and "${nothing} was not captured" in missing.read().decode()


def test_a_stalled_stream_sends_its_first_event_and_then_nothing(endpoint: Start) -> None:
    server = endpoint("endpoint-selftest.toml")
    response = _post(server, {**_messages("hang"), "stream": True}, timeout=2)
    assert response.status == 200
    assert response.readline() == b"event: message_start\n"
    response.readline()  # its data line
    response.readline()  # the blank line that ends the event
    try:
        more = response.readline()
    except TimeoutError:
        more = b""
    assert more == b"", "a stalled stream must send nothing after its first event"
