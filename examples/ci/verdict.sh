#!/usr/bin/env bash
# The benchmark verdict of a pull request: build base and head, judge head
# against base with `orchard verdict`, append the Markdown summary to
# $GITHUB_STEP_SUMMARY, exit as --fail-on says. The GitHub workflow beside
# this file runs exactly this script; tests/test_ci_example.py runs it locally.
#
# Inputs (environment):
#   BASE_SHA         commit to compare against (the pull request's base)
#   HEAD_DIR         checkout of the head commit (default: .)
#   BUILD            build command, run in each checkout (default: make)
#   BINARY           the built binary, relative to a checkout
#   SUITE            suite file, relative to a checkout; read from the BASE
#                    checkout, so a pull request cannot weaken its own benchmark
#   FAIL_ON          regressed | inconclusive | any (default: regressed)
#   RUNS             most pairs (default: the suite's)
#   CALIBRATION      calibration file kept between runs (default: none: the cache)
#   WORK             scratch directory (default: a new temporary directory)
#   GITHUB_STEP_SUMMARY  where the Markdown summary is appended (set by GitHub)
set -euo pipefail

: "${BASE_SHA:?BASE_SHA: the commit to compare against}"
: "${BINARY:?BINARY: the built binary, relative to a checkout}"
: "${SUITE:?SUITE: the suite file, relative to a checkout}"
HEAD_DIR=$(cd "${HEAD_DIR:-.}" && pwd)
BUILD=${BUILD:-make}
FAIL_ON=${FAIL_ON:-regressed}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
base="$WORK/base"

cleanup() { git -C "$HEAD_DIR" worktree remove --force "$base" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "::group::build base $BASE_SHA and head $(git -C "$HEAD_DIR" rev-parse --short HEAD)"
git -C "$HEAD_DIR" worktree add --detach "$base" "$BASE_SHA"
(cd "$base" && sh -c "$BUILD")
(cd "$HEAD_DIR" && sh -c "$BUILD")
echo "::endgroup::"

args=(verdict --suite "$base/$SUITE" --baseline "$base/$BINARY" --candidate "$HEAD_DIR/$BINARY"
      --json --fail-on "$FAIL_ON" --results "$WORK/results"
      --export-markdown "$WORK/verdict.md" --export-json "$WORK/verdict.json")
[ -n "${RUNS:-}" ] && args+=(--runs "$RUNS")
[ -n "${CALIBRATION:-}" ] && args+=(--calibration "$CALIBRATION")

status=0
orchard "${args[@]}" > "$WORK/verdict.stdout.json" || status=$?
if [ -s "$WORK/verdict.md" ]; then
  cat "$WORK/verdict.md" >> "${GITHUB_STEP_SUMMARY:-/dev/stdout}"
else
  echo "orchard verdict gave no verdict (exit $status); see the log above" >> "${GITHUB_STEP_SUMMARY:-/dev/stdout}"
fi
echo "verdict: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$WORK/verdict.json" 2>/dev/null || echo none) (exit $status, --fail-on $FAIL_ON)"
exit "$status"
