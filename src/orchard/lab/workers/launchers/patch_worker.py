"""The `patch` worker: a real worker with no model behind it.

Runs inside a tmux window (or subprocess) like any agent CLI:

    python -m orchard.lab.workers.launchers.patch_worker --experiment NAME --patch FILE \\
        --target DIR --bench DIR --report FILE --build CMD --test CMD --measure CMD

It applies the hypothesis's ready patch in its target checkout, then runs
the build and tests there and the measure command in its bench checkout
(each step only if configured and only while everything before it passed),
printing all output, and writes the report. The measure command's stdout is
kept in the report; if it is JSON with a `measurements` list in the report's
own shape, those become the report's measurements, otherwise none are
claimed. Exit status 0 when it ran its steps to the end and reported (the
report's status says whether they passed: the judge runs them again
itself), 1 when the patch did not apply. A worker that exits non-zero is
taken as one that did not finish, and is never judged.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchard.lab.workers.vcs import VcsError, get_vcs
from orchard.lab.workers.workspace import report as report_module

OUTPUT_KEPT = 4000  # characters of a step's output kept in the report


def _step(name: str, command: str, cwd: Path, *, capture: bool = False) -> dict[str, Any]:
    print(f"== {name}: {command}  (in {cwd})", flush=True)
    proc = subprocess.run(command, shell=True, cwd=cwd, executable="/bin/bash",
                          stdout=subprocess.PIPE if capture else None, stderr=None, text=True)
    step: dict[str, Any] = {"command": command, "exit_code": proc.returncode}
    if capture:
        output = proc.stdout or ""
        sys.stdout.write(output)
        sys.stdout.flush()
        try:
            step["output"] = json.loads(output)
        except json.JSONDecodeError:
            step["output"] = output[-OUTPUT_KEPT:]
    print(f"== {name}: exit {proc.returncode}", flush=True)
    return step


def _measurements(measure: dict[str, Any] | None) -> list[Any]:
    output = measure.get("output") if measure else None
    if isinstance(output, dict) and isinstance(output.get("measurements"), list):
        candidate: list[Any] = output["measurements"]
        probe = {**report_module.EXAMPLE, "measurements": candidate}
        if not report_module.validate(probe):
            return candidate
    return []


def _apply(args: argparse.Namespace, report: dict[str, Any], target: Path, bench: Path) -> str | None:
    """The patch applied to the checkout (and a bench patch to the bench), the files it changed in `report`;
    or why it could not be."""
    vcs = get_vcs(args.vcs)
    patch_path = Path(args.patch)
    try:
        print(f"== apply: {patch_path}  (in {target})", flush=True)
        vcs.apply(target, patch_path.read_text(encoding="utf-8"))
    except (OSError, VcsError) as error:
        print(f"== apply failed: {error}", flush=True)
        return f"the patch {patch_path} did not apply: {error}"
    report["changed_files"] = vcs.status(target)
    if args.bench_patch:
        # only ever used to show what the lab does with a worker that tampers with its harness:
        # in the sandbox the bench clone is read-only, and the attempt fails the worker
        print(f"== apply to the bench: {args.bench_patch}  (in {bench})", flush=True)
        try:
            vcs.apply(bench, Path(args.bench_patch).read_text(encoding="utf-8"))
        except (OSError, VcsError) as error:
            print(f"== bench patch did not apply: {error}", flush=True)
            return f"applied {patch_path.name}; the bench patch did not apply: {str(error)[:300]}"
    return None


def run(args: argparse.Namespace) -> int:
    target, bench = Path(args.target), Path(args.bench)
    report: dict[str, Any] = {
        "schema": report_module.SCHEMA,
        "experiment": args.experiment,
        "status": "failed",
        "summary": "",
        "changed_files": [],
        "build": None,
        "tests": None,
        "measure": None,
        "measurements": [],
        "notes": "patch worker: no model involved",
    }
    patch_path = Path(args.patch)
    failed = _apply(args, report, target, bench)
    if failed is not None:
        report["summary"] = failed
        report_module.write_report(Path(args.report), report)
        return 1
    ok = True
    for key, name, command, cwd, capture in (
        ("build", "build", args.build, target, False),
        ("tests", "test", args.test, target, False),
        ("measure", "measure", args.measure, bench, True),
    ):
        if not command:
            continue
        report[key] = _step(name, command, cwd, capture=capture)
        if report[key]["exit_code"] != 0:
            ok = False
            code = report[key]["exit_code"]
            report["summary"] = f"applied {patch_path.name}; the {name} step failed (exit {code})"
            break
    report["measurements"] = _measurements(report["measure"])
    if ok:
        report["status"] = "done"
        steps = [name for name in ("build", "tests", "measure") if report[name] is not None]
        report["summary"] = (f"applied {patch_path.name}; " + (", ".join(steps) + " passed" if steps
                                                               else "no build, test or measure configured"))
    report_module.write_report(Path(args.report), report)
    print(f"== report: {args.report} (status {report['status']})", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchard.lab.workers.launchers.patch_worker",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--patch", required=True, help="the ready patch (unified diff)")
    parser.add_argument("--target", required=True, help="the worker's target checkout")
    parser.add_argument("--bench", required=True, help="the worker's bench checkout")
    parser.add_argument("--report", required=True, help="where to write the report")
    parser.add_argument("--bench-patch", default="", help="a patch for the bench checkout (tamper demonstrations)")
    parser.add_argument("--vcs", default="git", choices=("git", "oak"))
    parser.add_argument("--build", default="")
    parser.add_argument("--test", default="")
    parser.add_argument("--measure", default="")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
