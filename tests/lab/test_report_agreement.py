"""FINAL_REPORT.md, report.html and the dashboard's /api snapshot against JOURNAL.md, number by number.

A real small lab runs to its end (sandboxed `command` workers, real git,
real verdicts on this machine): one win that lands and is merged, one change
that measures nothing, one that leaves its scope. Every effect, interval,
floor, verdict head, decision and commit each page shows is parsed out of
it and compared with the same number parsed out of JOURNAL.md; none is a
value written in this test.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import MetricEffect, cells, effect_cells, floor_pct
from orchard.lab.loop.lab import Lab
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import assert_nothing_left, git, make_repo
from tests.lab.loop_support import FINISHED, OLD, STDOUT_SUITE, add_hypotheses
from tests.lab.serve_support import fetch, serving, wait_until_served

# stdout_bytes is deterministic (exact values, no interval of its own); wall_ms is measured with noise, and
# only informs (a floor this wide keeps a loaded machine from deciding anything with it)
SUITE = STDOUT_SUITE + '\n[[metric]]\nname = "wall_ms"\nfloor = 2.0\ntarget = false\n'
WORKERS = {
    "fewer-lines": "sed -i 's/400/40/' run.sh",  # prints 40 lines: the win
    "a-comment": "echo '# prints the same' >> run.sh",  # measures as before: below every floor
    "stray-file": "echo stray > stray.txt",  # outside its scope: killed before any verdict
}
CONFIG = """
[target]
build = "chmod +x run.sh"
binary = "run.sh"

[bench]
suite = "suite.toml"

[workers]
count = 1
exploit = 1
explore = 0
executor = "subprocess"

[launcher]
name = "command"
template = "true"

[stop]
top_attempted = 3
idle_loops = 10
""" + "".join(f"\n[launchers.{name}]\nname = \"command\"\ntemplate = '''{template}; {FINISHED}'''\n"
              for name, template in WORKERS.items())
HEAD = re.compile(r"\*\*(PASS|NO-CHANGE|INCONCLUSIVE|REGRESSED|ERROR)\*\* (after .+? \(seed [^)]*\))")
Rows = list[list[str]]


@dataclass
class Journal:
    """What JOURNAL.md says, parsed from its text."""

    decisions: dict[str, str] = field(default_factory=dict)
    launchers: dict[str, str] = field(default_factory=dict)
    verdicts: dict[str, tuple[str, Rows]] = field(default_factory=dict)  # experiment: (head, table)
    checks: dict[str, tuple[str, Rows]] = field(default_factory=dict)  # main after each merge
    merges: dict[str, dict[str, str]] = field(default_factory=dict)
    published: dict[str, dict[str, str]] = field(default_factory=dict)
    final: dict[str, str] = field(default_factory=dict)
    final_verdict: tuple[str, Rows] = ("", [])
    start_base: str = ""
    floors: dict[str, str] = field(default_factory=dict)


def md_rows(text: str, header: str) -> Rows:
    """The rows of every Markdown table in `text` whose header row starts with `header`."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith(header):
            inside = True
        elif inside and line.startswith("|---"):
            continue
        elif inside and line.startswith("| "):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        else:
            inside = False
    return rows


def verdict_of(text: str) -> tuple[str, Rows]:
    """A verdict's head (`PASS after 6 pairs (seed 7)`) and its table, from Markdown."""
    head = HEAD.search(text)
    return ("" if head is None else f"{head.group(1)} {head.group(2)}", md_rows(text, "| metric | verdict |"))


def bullets(text: str) -> dict[str, str]:
    """`- key: value` lines."""
    return dict(re.findall(r"^- ([\w-]+): (.*)$", text, re.MULTILINE))


def read_journal(text: str) -> Journal:
    journal = Journal()
    for entry in re.split(r"^## \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC · ", text, flags=re.MULTILINE)[1:]:
        head, _, body = entry.partition("\n")
        kind, _, experiment = head.partition(" · ")
        if kind == "lab-start":
            journal.start_base = re.findall(r"Target base `(\w+)`", body)[0]
            journal.floors = {row[0]: row[2] for row in md_rows(body, "| metric | baseline median |")}
        elif kind == "experiment-start":
            journal.launchers[experiment] = re.findall(r"launcher `([^`]+)`", body)[0]
        elif kind == "judgment":
            journal.decisions[experiment] = re.findall(r"^\*\*(LAND|KILL|ITERATE)\*\* · ", body, re.MULTILINE)[0]
            journal.verdicts[experiment] = verdict_of(body)
        elif kind == "merge":
            journal.merges[experiment] = bullets(body)
        elif kind == "publish":
            journal.published[experiment] = bullets(body)
        elif kind == "main-check":
            journal.checks[experiment] = verdict_of(body)
        elif kind == "final-verdict":
            journal.final = bullets(body)
            journal.final_verdict = verdict_of(body)
    return journal


def short(commit: str) -> str:
    """A commit as the journal prints it in full, cut as the pages print it; checked against the full one."""
    assert re.fullmatch(r"[0-9a-f]{40}", commit), commit
    return commit[:10]


def html_rows(fragment: str) -> Rows:
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>((?:<td[^>]*>.*?</td>)+)</tr>", fragment, re.DOTALL)]


def html_verdict(fragment: str) -> tuple[str, Rows]:
    head = re.search(r"Verdict <b>([A-Z-]+)</b> (after .+? \(seed [^)]*\))</p>", fragment)
    return ("" if head is None else f"{head.group(1)} {html.unescape(head.group(2))}", html_rows(fragment))


def section(page: str, name: str) -> str:
    found = re.search(rf"<section id='{name}'>(.*?)</section>", page, re.DOTALL)
    assert found, f"no section {name}"
    return found.group(1)


def figures(page: str) -> dict[str, dict[str, Any]]:
    found = re.search(r"orchardDraw\((\[.*\])\);</script>", page, re.DOTALL)
    assert found, "report.html draws no charts"
    return {f["id"]: f["figure"] for f in json.loads(found.group(1).replace("<\\/", "</"))}


def effect(row: list[str]) -> str:
    """A verdict row's effect with its interval, as the leaderboard prints them together."""
    return f"{row[2]} {row[3]}"


def snapshot_rows(verdict: dict[str, Any] | None) -> Rows:
    """The served snapshot's verdict, each metric's raw numbers printed as a verdict table prints them."""
    return [] if verdict is None else [cells(MetricEffect(**m)) for m in verdict["metrics"]]


@pytest.fixture
def finished_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: str) -> tuple[Workspace, Path]:
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    repo = make_repo(tmp_path / "myproject", {"run.sh": "#!/bin/sh\n" + OLD})  # a working copy, main checked out
    (tmp_path / "suite.toml").write_text(SUITE)
    (tmp_path / "orchard.toml").write_text(CONFIG)
    ws = init_workspace(tmp_path / "ws", str(repo), None, tmp_path / "orchard.toml")
    state = LabState.open(ws.root)
    try:
        add_hypotheses(state, *({"id": name, "launcher": name, "metric": "out/stdout_bytes", "scope": ["run.sh"]}
                                for name in WORKERS))
        Lab(ws, state, say=lambda _: None).run()
    finally:
        state.close()
    assert_nothing_left(mark, None)
    return ws, repo


@pytest.mark.slow
def test_every_number_of_the_reports_and_the_dashboard_is_the_journals(
        finished_lab: tuple[Workspace, Path], mark: str) -> None:
    ws, repo = finished_lab
    journal = read_journal((ws.root / "JOURNAL.md").read_text())
    # the lab did what this test compares: a merged win, a change measured as no better, a kill before any verdict
    assert set(WORKERS) <= set(journal.decisions), journal.decisions
    landed = [name for name, decision in journal.decisions.items() if decision == "LAND"]
    assert landed == ["fewer-lines"] and list(journal.merges) == landed, journal.decisions
    assert journal.decisions["a-comment"] != "LAND" and journal.verdicts["a-comment"][1]
    assert journal.decisions["stray-file"] == "KILL" and journal.verdicts["stray-file"] == ("", [])
    assert journal.final["moved"] == "True" and journal.final_verdict[1]
    check_final_report(ws, repo, journal)
    page = (ws.root / "report.html").read_text()
    check_page(page, journal)
    with serving(ws.root, mark=mark) as server:
        wait_until_served(server)
        status, body, _ = fetch(server.base + "api/view")
        assert status == 200
        check_snapshot(json.loads(body), journal)
        status, body, _ = fetch(server.base + "api/page")
        live = json.loads(body)["sections"]
    for name in ("final", "leaderboard", "chart-experiments"):
        assert live[name] == section(page, name), f"the dashboard's {name} is not report.html's"
    # the experiments table is report.html's, its names linking to each experiment's page instead of its entry
    table = section(page, "experiments").split("</table>")[0] + "</table>"
    assert live["experiments"].replace("href='experiment/", "href='#exp-") == table


def check_final_report(ws: Workspace, repo: Path, journal: Journal) -> None:
    report = (ws.root / "FINAL_REPORT.md").read_text()
    counts = Counter(journal.decisions.values())
    assert re.findall(r"^(\d+) experiments: (\d+) landed, (\d+) killed, (\d+) iterated\.$", report, re.MULTILINE) == [
        (str(len(journal.launchers)), str(counts["LAND"]), str(counts["KILL"]), str(counts["ITERATE"]))]
    # main at the end against main at the start: its commits, head and every cell of its table
    final = report.split("## Main at the end against main at the start")[1].split("\n## ")[0]
    end, start = re.findall(r"One paired verdict of main `(\w+)` against main at the start `(\w+)`", final)[0]
    assert (end, start) == (short(journal.final["end"]), short(journal.final["start"]))
    assert start == journal.start_base
    assert verdict_of(final) == journal.final_verdict
    # every decision: the landed with their launcher, branch and merge commit; the killed
    landed = re.findall(r"^- `(\S+)` on `(\S+)` via `(\S+)` \(merged as `(\w+)`, on `(\S+)` in the target\): ",
                        report, re.MULTILINE)
    assert sorted((name, branch, launcher) for name, branch, launcher, _, _ in landed) == sorted(
        (name, journal.merges[name]["branch"], journal.launchers[name])
        for name, decision in journal.decisions.items() if decision == "LAND")
    for name, _, _, merged, on in landed:
        assert merged == short(journal.merges[name]["commit"]) and on == journal.published[name]["branch"]
    killed = report.split("## Killed hypotheses")[1].split("\n## ")[0]
    assert sorted(re.findall(r"^- `(\S+)`(?: \(hypothesis `\S+`\))? via `(\S+)`: ", killed, re.MULTILINE)) == sorted(
        (name, journal.launchers[name]) for name, decision in journal.decisions.items() if decision == "KILL")
    # the merge command it prints takes exactly the journal's merge
    command = re.findall(r"^git -C (\S+) merge (\S+)$", report, re.MULTILINE)
    assert command == [(str(repo), journal.published["fewer-lines"]["branch"])]
    merged = git(repo, "rev-parse", command[0][1]).strip()
    assert merged == journal.published["fewer-lines"]["commit"] == journal.merges["fewer-lines"]["commit"]
    board = md_rows((ws.root / "LEADERBOARD.md").read_text(), "| metric | direction |")
    check_leaderboard([[row[0], row[3], *row[4:]] for row in board], journal, change=r"`(\S+?)` \((\w+)\)")


def check_leaderboard(rows: Rows, journal: Journal, *, change: str) -> None:
    """Per metric (name, best change, its effect, main vs start, floor): the journal's judgment and final verdict."""
    finals = {row[0]: row for row in journal.final_verdict[1]}
    assert sorted(row[0] for row in rows) == sorted(finals)
    for metric, by, best, main, floor in rows:
        assert (main, floor) == (effect(finals[metric]), finals[metric][4]), metric
        if by == "-":
            assert best == "-"
            continue
        found = re.fullmatch(change, by)
        assert found, by
        name, commit = found.groups()
        assert journal.decisions[name] == "LAND" and commit == short(journal.merges[name]["commit"])
        judged = {row[0]: row for row in journal.verdicts[name][1]}
        assert best == effect(judged[metric]) and judged[metric][1] == "improved", metric


def check_page(page: str, journal: Journal) -> None:
    summary = section(page, "summary")
    counts = Counter(journal.decisions.values())
    assert f"{len(journal.launchers)} experiments: {counts['LAND']} LAND, {counts['KILL']} KILL, " \
           f"{counts['ITERATE']} ITERATE" in summary
    # every experiment: its decision, and its verdict's head and table cell by cell
    experiments = re.findall(r"<details id='exp-[^']+' data-experiment='([^']+)'><summary>.*?<span class='(\w+)'>(.*?)"
                             r"</details>", section(page, "experiments"), re.DOTALL)
    assert {name: decision for name, decision, _ in experiments} == journal.decisions
    for name, _, body in experiments:
        assert html_verdict(body) == journal.verdicts[name], name
    final = section(page, "final")
    assert html_verdict(final) == journal.final_verdict
    assert re.findall(r"main <code>(\w+)</code> against main at the start <code>(\w+)</code>", final) == [
        (short(journal.final["end"]), short(journal.final["start"]))]
    board = html_rows(section(page, "leaderboard"))
    check_leaderboard([[row[0], row[3], *row[4:]] for row in board], journal, change=r"<code>(\S+?)</code> \((\w+)\)")
    drawn = figures(page)
    for key in {row[0] for _, table in journal.verdicts.values() for row in table} | set(journal.floors):
        chart = drawn[f"experiments-{key.replace('/', '-').replace('_', '-')}"]
        shown = {d[0]: d for trace in chart["data"] for d in trace.get("customdata") or []}
        for name, (_, rows) in journal.verdicts.items():
            row = next((r for r in rows if r[0] == key), None)
            if row is None:
                assert name not in shown
                continue
            assert shown[name][1:] == [journal.decisions[name], *row[1:5], int(row[5]), *row[7:]], (key, name)
        legend = [t["name"] for t in chart["data"] if t["name"].startswith("noise floor")]
        with_intervals = any("error_y" in t for t in chart["data"])  # a deterministic metric has no floor band
        assert legend == ([f"noise floor ±{journal.floors[key]}"] if with_intervals else []), key
    # main over time: a step at the lab's start and one at the merge, with the main check's numbers
    for key, floor in journal.floors.items():
        main = drawn[f"main-{key.replace('/', '-').replace('_', '-')}"]["data"][0]
        merge = journal.merges["fewer-lines"]["commit"]
        checked = next(r for r in journal.checks["fewer-lines"][1] if r[0] == key)
        if main["mode"] == "markers+text":  # deterministic: its exact values
            assert main["text"][-1] == checked[8] and floor == "0.00%", key
        else:
            assert main["text"] == [journal.start_base, short(merge)], key
            assert main["customdata"][-1][1:3] == [checked[2], checked[3]], key


def check_snapshot(snapshot: dict[str, Any], journal: Journal) -> None:
    """/api/view serves raw numbers: printed by the one formatter, each is the journal's."""
    experiments = {e["name"]: e for e in snapshot["experiments"]}
    assert {name: e["decision"] for name, e in experiments.items()} == journal.decisions
    for name, e in experiments.items():
        assert snapshot_rows(e["verdict"]) == journal.verdicts[name][1], name
        assert e["launcher"] == journal.launchers[name]
        assert e["merge_commit"] == journal.merges.get(name, {}).get("commit"), name
    final = snapshot["final"]
    assert (final["start"], final["end"], str(final["moved"])) == (
        journal.final["start"], journal.final["end"], journal.final["moved"])
    assert snapshot_rows(final["verdict"]) == journal.final_verdict[1]
    assert {key: floor_pct(floor) for key, floor in snapshot["floors"].items()} == journal.floors
    for row in snapshot["leaderboard"]:
        best = None if row["effect"] is None else MetricEffect(**row["effect"])
        final_effect = None if row["final"] is None else MetricEffect(**row["final"])
        finals = {r[0]: r for r in journal.final_verdict[1]}
        shown = effect_cells(best, final_effect)
        assert shown[1:] == [effect(finals[row["metric"]]), finals[row["metric"]][4]], row["metric"]
        if best is not None:
            judged = {r[0]: r for r in journal.verdicts[row["by"]][1]}
            assert shown[0] == effect(judged[row["metric"]])
            assert row["commit"] == journal.merges[row["by"]]["commit"]
