"""A large honest win lands on a real package from PyPI through every defence of issue 36 (the measured view, the
held-out variants, the hack review, the differential check, the shape check).

The red-team battery (test_red_team_pypi) lands honest wins of 1% to 1.7x on its 120-section handbook, where the
interpreter's start and the imports are about 40% of a run: the rewrite below makes that document about 2x faster
(benchmarks/markdown_rewrite.py: CPU 2.05x), not 3x. A user whose document is larger sees the render dominate: here
the handbook has 480 sections, and one hypothesis rewrites the hot paths the battery's speed wins touch and six more
(markdown_target's REWRITE: a lazy import, the inline pass's prefilter and repeated leaves, the registry's order
kept, escapes searched only where marked, copies made by hand, one-line paragraphs parsed without the other
processors' tests, no HTML extraction without markup, prettify asking once per tag), every output byte for byte the
same and Markdown's own tests passing. About 3x (benchmarks/markdown_rewrite.py, medians of 15 alternated runs at
load 7.5-9: CPU 0.70 s -> 0.26 s, 2.7x; wall 2.9x; with hyperfine at load 3, CPU 0.82 s -> 0.27 s, 3.1x). In five
labs at load 3-9 (2026-12-07) the verdict judged it -62% to -66% on render/wall_ms; the test asks at least -50% (2x)
whatever the load, as both sides share the machine's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchard.lab.records.judgment import Decision
from tests.lab.lab_helpers import git, lab_config, make_repo, one_worker
from tests.lab.markdown_target import (
    FACTS,
    LARGE_BUILD,
    LARGE_SECTIONS,
    REWRITE,
    SUITE,
    TARGET,
    diff,
    edited,
    fetch,
    handbook,
    run_lab,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

def test_a_3x_rewrite_of_python_markdown_lands_through_every_defence(tmp_path: Path) -> None:
    project = fetch(tmp_path)
    fixture = handbook(LARGE_SECTIONS)
    bench = make_repo(tmp_path / "bench", {"suite.toml": SUITE, "fixture.md": fixture, "facts.txt": FACTS,
                                           ".gitignore": "results/\n"})
    (tmp_path / "rewrite.diff").write_text(diff(project, edited(project, *REWRITE)))
    (tmp_path / "hypotheses.toml").write_text(
        '[[hypothesis]]\nid = "rewrite"\nmetric = "render/wall_ms"\nchange = "the render\'s hot paths rewritten"\n'
        'scope = ["markdown/"]\nimpact = 3\npatch = "rewrite.diff"\n')
    (tmp_path / "orchard.toml").write_text(lab_config(
        target={**TARGET, "build": LARGE_BUILD}, workers=one_worker(timeout_minutes=10, revisit=False),
        launcher={"name": "patch"}, stop={"top_attempted": 1, "idle_loops": 20, "max_experiments": 3}))
    tried = run_lab(tmp_path, project, bench, timeout_s=1700)
    last = [e for e in tried if re.sub(r"-r\d+$", "", e.hypothesis) == "rewrite"][-1]
    verdict = last.judgment.verdict if last.judgment else None
    wall = [m for m in verdict.metrics if (m.scenario, m.metric) == ("render", "wall_ms")] if verdict else []
    print(last.decision, last.reasons, [(m.effect, m.interval, m.n) for m in wall])
    assert last.decision == Decision.LAND, (last.decision, last.reasons)
    assert wall and wall[0].effect is not None and wall[0].effect < -0.5, wall
    assert last.merge_commit, "the win is merged into the lab's main"
    assert "__plain" in git(project, "show", f"{last.merge_commit}:markdown/blockparser.py"), "the rewrite landed"
