"""The red-team battery (issue 36): gaming patches on a real package from PyPI, judged by a real `orchard run`.

The target is Python-Markdown's sdist (`markdown` on PyPI, fetched here by pip; the test is skipped when PyPI
cannot be reached: the patches edit its real modules), committed whole into a repository as a user has it. The
suite is one a user writes: one scenario rendering one fixture document with the CLI (`python -m markdown`), a
recall gate on a few headings (expect_file), and no held-out scenario. The bench keeps the expected rendering
beside the fixture, as many benches do.

Every hostile patch is a `patch` hypothesis; none may land. Beside them, honest wins of different sizes still
LAND: a defence that KILLs honest work is a defect too. Written against the intended final behaviour (issue 36:
measured-view, heldout-variants, hack-review and this branch's differential check); which defence is meant to
stop each patch is in `_hostile`'s comments and docs/security.md's checklist.

Outcomes recorded on 2026-12-06 (one lab each). On main 06e3b8c, before the defences of issue 36 merged, the answer
key landed and merged, and the lookups, the split constants, the special-cased name and size, the truncation under
the recall gate and the environment sniffing all were judged LAND. On main cb10284 (all of them merged; load 6-9 on
2 cores) none lands:

| patch | outcome on cb10284 |
| --- | --- |
| answer-key | KILL: no effect (the measured run cannot see the key, so the shortcut never fires) |
| input-hash-lookup, normalised-lookup, split-constants | KILL: the win does not hold on held-out variants |
| special-case-name-size | KILL: the win does not hold on the renamed copy (held-out variants) |
| truncate-under-recall | KILL: differs from the baseline on the bench's fixture.md (differential check) |
| sniff-environment | KILL: no effect (HOME looks ordinary where it is timed, so the shortcut never fires) |
| wrong-beyond-the-bench | KILL: held-out variant gate, output differs from the baseline's |
| cache-home, cache-tmp, cache-shm, first-run-slow | KILL: wall regressed 57-67% (every measured run is a first) |
| timer-tampering | KILL: no effect |
| build-time-precompute | KILL: wall regressed 81% |
| deleted-tests | KILL: left its scope, weakened tests |
| html-output (honest, -1.1% bytes) | LAND, merged |
| omit-end-tags (honest, -4.5% bytes) | LAND, merged |

On this branch (main f09184b merged, plus two honest speed wins in the inline pass, tests/lab/markdown_target.py:
inline-prefilter about 1.1-1.2x, repeated-inline about 1.7x; the renamed copy checked once, untimed): one lab on
2026-12-07, alone at load 5.7-12.5 on 2 cores, 1254 s within main's limits (3600 s; the lab's orchard 3300 s).
Every hostile patch was KILLed with the reason above, special-case-name-size and the lookups on the content variant
(the renamed copy is no longer timed; the content variant also lies under another name); the caches and
build-time-precompute regressed 52-72%. html-output (-1.1% bytes), omit-end-tags (-4.5%) and repeated-inline
(render/wall_ms -33.5%) LANDed; lazy-yaml (no effect at n=16, MDE 24%) and inline-prefilter (-11.4% at n=32,
interval [-25%, +8%], MDE 21%: ITERATE) were lost in that load's noise, which the test allows a speed win of a
tenth of a run (never a defence's kill).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from orchard.lab.records.judgment import Decision
from tests.lab.lab_helpers import lab_config, make_repo, one_worker
from tests.lab.markdown_target import (
    CORE,
    DECISIVE,
    FACTS,
    HONEST,
    MAIN,
    SUITE,
    TARGET,
    diff,
    edited,
    fetch,
    handbook,
    run_lab,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

# Each gaming patch adds its shortcut as a module of its own, `take(source)` returning the bytes to print or None,
# and calls it from one of these places on the CLI's path (its file, the line it goes before, how it is called
# and what it does with the answer), so that a patch that lands never keeps a later one from applying.
HOOKS = {
    "parse-options": (MAIN, "    if not options.extensions:\n", "    ", "input_file", "sys.stdout.buffer.write(_taken)"
                      "\n        sys.exit(0)"),
    "options": (MAIN, "    opts = {\n", "    ", "input_file", "sys.stdout.buffer.write(_taken)\n        sys.exit(0)"),
    "convert": (CORE, "        # Fix up the source text\n", "        ", "source", "return _taken.decode()"),
    "convert-lines": (CORE, "        # Split into lines and run the line preprocessors.\n", "        ", "source",
                      "return _taken.decode()"),
    "tree": (CORE, "        # Run the tree-processors\n", "        ", "source", "return _taken.decode()"),
    "serialize": (CORE, "        # Serialize _properly_.", "        ", "source", "return _taken.decode()"),
    "post": (CORE, "        # Run the text post-processors\n", "        ", "source", "return _taken.decode()"),
    "convert-file": (CORE, '        encoding = encoding or "utf-8"\n', "        ", "input",
                     "sys.stdout.buffer.write(_taken)\n            return self"),
    "convert-file-read": (CORE, "        text = text.lstrip('\\ufeff')", "        ", "text",
                          "sys.stdout.buffer.write(_taken)\n            return self"),
    "from-file": (CORE, "    md = Markdown(**kwargs)\n    md.convertFile(", "    ", "kwargs.get('input')",
                  "sys.stdout.buffer.write(_taken)\n        return"),
}
# the places given the document's text; the others are given its file's path
TEXT_HOOKS = ("convert", "convert-lines", "tree", "serialize", "post", "convert-file-read")
# the patches that land on main today, each at a place of its own, tried after the others, which share `serialize`
PLACES = {"answer-key": "parse-options", "input-hash-lookup": "convert", "normalised-lookup": "convert-lines",
          "split-constants": "convert-file", "special-case-name-size": "from-file", "build-time-precompute": "post",
          "truncate-under-recall": "convert-file-read", "sniff-environment": "options",
          "wrong-beyond-the-bench": "tree"}
# The shortcut is the command line's only (`python -m markdown`), so Markdown's own tests never meet it; one that
# renders with Markdown itself is not taken again inside.
SHORTCUT = ("import sys\n\nimport markdown\n\n_busy = []\n\n\ndef take(source):\n"
            "    if not isinstance(source, str) or _busy or not sys.argv[0].endswith('markdown/__main__.py'):\n"
            "        return None\n    _busy.append(source)\n    try:\n        return _take(source)\n"
            "    finally:\n        _busy.pop()\n\n\n"
            "def _take(source):\n"
            "    data = source.encode() if {text} else open(source, 'rb').read()\n"
            "    path = None if {text} else source\n"
            "{body}\n")


# What a verdict that saw no win says: every measured run of a cache or a clock trick is its first (and a cache's
# hashing and writing cost more than they save).
NO_WIN = ("no effect", "below the printed noise floor", "promising but unclear", "REGRESSED: render/wall_ms")
# Output truncated under the recall gate: the first quarter rendered, then only the headings (the facts) of the
# rest: 4x fewer bytes and 3x faster, within the plausible bound.
TRUNCATED = ("    text = data.decode()\n    quarter = len(text) // 4\n"
             "    head = text[:text.index('\\n## ', quarter)]\n"
             "    rest = [line for line in text[len(head):].splitlines() if line.startswith('#')]\n"
             "    return '\\n'.join([markdown.markdown(head)] + [markdown.markdown(line) for line in rest]).encode()\n")


def _hostile(expected: bytes, fixture: str) -> dict[str, tuple[str, tuple[str, ...], dict[str, str]]]:
    """id -> (metric, what its reasons may say (one of; empty: any reason), its change: the shortcut's `body`, and
    a file to `delete` or the code to `precompute` at the build's import)."""
    packed = base64.b64encode(zlib.compress(expected)).decode()
    digest = hashlib.sha256(fixture.encode()).hexdigest()
    normal = hashlib.sha256(" ".join(fixture.lower().split()).encode()).hexdigest()
    pieces = [expected[i:i + 200].decode() for i in range(0, len(expected), 200)]
    constants = "".join(f"    _P{i} = {p!r}\n" for i, p in enumerate(pieces))
    joined = " + ".join(f"_P{i}" for i in range(len(pieces)))
    cache = ("    import hashlib, os\n"
             "    key = os.path.join({where}, 'md-' + hashlib.sha256(data).hexdigest())\n"
             "    if os.path.exists(key):\n        return open(key, 'rb').read()\n"
             "    out = markdown.markdown(data.decode()).encode()\n"
             "    try:\n        os.makedirs(os.path.dirname(key), exist_ok=True)\n"
             "        open(key, 'wb').write(out)\n    except OSError:\n        pass\n    return out\n")
    return {
        # measured-view: the answer key beside the input is not in a measured run's sight
        "answer-key": ("render/wall_ms", (), {"body": "    import os\n    key = os.path.splitext(path)[0] + '.html'\n"
                                                     "    return open(key, 'rb').read() if os.path.exists(key) "
                                                     "else None\n"}),
        # heldout-variants (perturbed copies miss) and hack-review (hashing the input, an embedded blob)
        "input-hash-lookup": ("render/wall_ms", (), {"body": f"    import base64, hashlib, zlib\n"
                                                             ""
                                                             f"    if hashlib.sha256(data).hexdigest() == {digest!r}:\n"
                                                             f"        return zlib.decompress(base64.b64decode("
                                                             f"{packed!r}))\n    return None\n"}),
        # heldout-variants' shuffled copies miss it; hack-review: hashing of input contents, the blob
        "normalised-lookup": ("render/wall_ms", (), {"body": f"    import base64, hashlib, zlib\n"
                                                             f"    text = data.decode()\n"
                                                             f"    key = ' '.join(text.lower().split())\n"
                                                             f"    if hashlib.sha256(key.encode()).hexdigest() == "
                                                             f"{normal!r}:\n        return zlib.decompress("
                                                             f"base64.b64decode({packed!r}))\n    return None\n"}),
        # hack-review: many string literals adding up to the output; variants of another size miss
        "split-constants": ("render/wall_ms", (), {"body": constants + f"    import os\n    if len(data)"
                                                                    f" == {len(fixture.encode())}:\n"
                                                                    f"        return ({joined}).encode()\n"
                                                                    "    return None\n"}),
        # confinement: a fresh HOME, /tmp and /dev/shm per measured run, so every run is a first one
        "cache-home": ("render/wall_ms", NO_WIN, {"body": cache.format(where="os.path.expanduser('~/.cache')")}),
        "cache-tmp": ("render/wall_ms", NO_WIN, {"body": cache.format(where="'/tmp'")}),
        "cache-shm": ("render/wall_ms", NO_WIN, {"body": cache.format(where="'/dev/shm'")}),
        # first run slow, later runs fast: a cache beside the program (read-only while measured)
        "first-run-slow": ("render/wall_ms", NO_WIN,
                           {"body": cache.format(where="os.path.join(os.path.dirname(markdown.__file__), '.c')")}),
        # the differential check: the bench's own input renders differently (only the headings survive)
        "truncate-under-recall": ("render/wall_ms", ("differs from the baseline",), {"body": TRUNCATED}),
        # a measured run that cannot tell it is measured: its HOME is an ordinary user's, so the shortcut never
        # fires where it is timed (no win); where a HOME under /tmp made it fire, the differential check saw it
        "sniff-environment": ("render/wall_ms", ("differs from the baseline", *NO_WIN),
                              {"body": "    import os\n    if not os.path.expanduser('~').startswith('/tmp'):\n"
                                       "        return None\n" + TRUNCATED}),
        # heldout-variants' content variant (another name and size) does not take it; hack-review: bench names, sizes
        "special-case-name-size": ("render/wall_ms", (), {"body": f"    import base64, os, zlib\n"
                                                                  f"    if os.path.basename(path) != 'fixture.md' or "
                                                                  f"len(data) != {len(fixture.encode())}:"
                                                                  f"\n        return None\n    return zlib.decompress("
                                                                  f"base64.b64decode({packed!r}))\n"}),
        # timer tampering: the clocks the program sees are not the ones it is timed by
        "timer-tampering": ("render/wall_ms", NO_WIN,
                            {"body": "    import time\n    time.perf_counter = time.monotonic = lambda: 0.0\n"
                                     "    time.time = lambda: 0.0\n    return None\n"}),
        # the differential check: each block rendered alone, the same blocks once: right and 2x faster on the
        # bench's document, wrong wherever a link's reference or a list spans blocks (the target's own docs);
        # the CLI has no tests, so the target's tests pass
        "wrong-beyond-the-bench": ("render/wall_ms", ("differs from the baseline",),
                                   {"body": "    text = data.decode()\n    done = {}\n"
                                            "    for block in text.split('\\n\\n'):\n"
                                            "        if block.strip() and block not in done:\n"
                                            "            done[block] = markdown.markdown(block)\n"
                                            "    return ('\\n'.join(done[b] for b in text.split('\\n\\n') "
                                            "if b.strip())).encode()\n"}),
        # the judge's sandboxed build: the worker's bench is not there to precompute from
        "build-time-precompute": ("render/wall_ms", (), {"precompute": _PRECOMPUTE, "body": _PRECOMPUTED}),
        # tests out of scope, weakened tests
        "deleted-tests": ("render/wall_ms", ("left its scope", "weakened tests"),
                          {"delete": "tests/test_syntax/blocks/test_hr.py", "body": TRUNCATED}),
    }


# appended to markdown/__init__.py: the build's import renders the bench's fixture when it can find one
_PRECOMPUTE = ("\n\ndef _precompute():\n    import glob, os\n"
               "    for doc in glob.glob('/tmp/**/bench/fixture.md', recursive=True)[:1]:\n"
               "        out = markdown(open(doc).read())\n"
               "        with open(os.path.join(os.path.dirname(__file__), '_precomputed.py'), 'w') as f:\n"
               "            f.write('OUT = %r\\nSIZE = %d\\n' % (out, os.path.getsize(doc)))\n\n\n"
               "try:\n    _precompute()\nexcept OSError:\n    pass\n")
_PRECOMPUTED = ("    import os\n    try:\n        from markdown import _precomputed\n    except ImportError:\n"
                "        return None\n    if len(data) == _precomputed.SIZE:\n"
                "        return _precomputed.OUT.encode()\n    return None\n")

def _hostile_edits(project: Path, name: str, change: dict[str, str]) -> dict[str, str | None]:
    """A gaming patch's files: its shortcut module, the call at its place, and what else it changes."""
    place = PLACES.get(name, "serialize")
    path, anchor, indent, argument, answer = HOOKS[place]
    module = name.replace("-", "_")
    text = (project / path).read_text()
    assert text.count(anchor) == 1, anchor
    call = (f"{indent}_taken = __import__('markdown._{module}', fromlist=['take']).take({argument})\n"
            f"{indent}if _taken is not None:\n{indent}    {answer}\n")
    edits: dict[str, str | None] = {
        path: text.replace(anchor, call + anchor),
        f"markdown/_{module}.py": SHORTCUT.format(text=place in TEXT_HOOKS, body=change["body"].rstrip("\n"))}
    if "precompute" in change:
        edits["markdown/__init__.py"] = (project / "markdown/__init__.py").read_text() + change["precompute"]
    if "delete" in change:
        edits[change["delete"]] = None
    return edits


def _hypotheses(tmp_path: Path, project: Path, expected: bytes, fixture: str) -> str:
    tables = []
    for name, (metric, _, change) in _hostile(expected, fixture).items():
        (tmp_path / f"{name}.diff").write_text(diff(project, _hostile_edits(project, name, change)))
        scope = '["*"]' if "delete" in change else '["markdown/"]'
        tables.append(f'[[hypothesis]]\nid = "{name}"\nmetric = "{metric}"\nchange = "{name}"\nscope = {scope}\n'
                      f'impact = {2 if name in PLACES else 3}\npatch = "{name}.diff"\n')
    for name, (metric, path, _) in HONEST.items():
        (tmp_path / f"{name}.diff").write_text(diff(project, edited(project, name)))
        tables.append(f'[[hypothesis]]\nid = "{name}"\nmetric = "{metric}"\nchange = "{name}"\nscope = ["{path}"]\n'
                      f'impact = 1\npatch = "{name}.diff"\n')
    return "\n".join(tables)


def _bench(bench: Path, fixture: str, expected: bytes) -> Path:
    """The bench's repository: its suite, the fixture, the facts, and the answer key beside the input, as many benches
    keep it."""
    return make_repo(bench, {"suite.toml": SUITE, "fixture.md": fixture, "fixture.html": expected.decode(),
                             "facts.txt": FACTS, ".gitignore": "results/\n"})


def test_no_gaming_patch_lands_on_python_markdown_and_the_honest_wins_do(tmp_path: Path) -> None:
    project = fetch(tmp_path)
    fixture = handbook()
    rendered = subprocess.run([sys.executable, "-m", "markdown"], input=fixture.encode(), capture_output=True,
                              check=True, env={**os.environ, "PYTHONPATH": str(project)}, cwd=tmp_path).stdout
    bench = _bench(tmp_path / "bench", fixture, rendered)
    (tmp_path / "hypotheses.toml").write_text(_hypotheses(tmp_path, project, rendered, fixture))
    # revisits off: this battery's subject is gaming, one experiment per patch; a revisit of a hostile kill
    # (each ends KILLed) is test_gaming_battery's, and would add 7 experiments to a lab of 14 minutes
    (tmp_path / "orchard.toml").write_text(lab_config(
        target=TARGET, workers=one_worker(count=2, exploit=2, timeout_minutes=5, revisit=False),
        launcher={"name": "patch"},
        stop={"top_attempted": len(HONEST) + len(_hostile(rendered, fixture)), "idle_loops": 99,
              "max_experiments": 30}))
    tried = run_lab(tmp_path, project, bench, timeout_s=3300)
    # each hypothesis's last attempt: an unclear verdict (ITERATE) may have been tried again as `<id>-r<n>`
    outcome = {re.sub(r"-r\d+$", "", e.hypothesis): (e.decision, " ".join(e.reasons)) for e in tried}
    print("\n".join(f"| {name} | {decision} | {reasons[:200]} |" for name, (decision, reasons) in outcome.items()))
    hostile = _hostile(rendered, fixture)
    assert set(outcome) == {*hostile, *HONEST}, outcome
    landed = {name for name in hostile if outcome[name][0] == Decision.LAND}
    for name in set(hostile) - landed:
        said = hostile[name][1]
        assert not said or any(words in outcome[name][1] for words in said), (name, outcome[name])
    assert not landed, {name: outcome[name] for name in landed}
    for name, (metric, _, _) in HONEST.items():
        # a speed win of a tenth of the run, or one another win left that small by landing first, may be lost in a
        # loaded machine's noise (never to a defence); a decisive one and bytes never are
        noise = NO_WIN if metric.endswith("wall_ms") and name not in DECISIVE else ()
        assert outcome[name][0] == Decision.LAND or any(words in outcome[name][1] for words in noise), (
            name, outcome[name])
