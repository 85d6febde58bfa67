#!/usr/bin/env bash
# The benchmark verdict of a pull request: build base and head, judge head
# against base with `orchard verdict`, append the Markdown summary to
# $GITHUB_STEP_SUMMARY, exit as --fail-on says. action.yml beside this file
# runs its phases as the action's steps; tests/test_ci_example.py runs those
# steps locally, on real git repositories.
#
#   verdict.sh key      check out the base; print the calibration's cache key
#   verdict.sh judge    build base and head, judge, write the summary
#   verdict.sh comment  post the summary on the pull request, or update the one posted before
#   verdict.sh          key, then judge (to run it by hand)
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
#   CALIBRATION      calibration file kept between runs (default: none: orchard's own cache)
#   WORK             scratch directory (default: a new temporary directory)
#   ORCHARD          the orchard command (default: orchard)
#   GITHUB_OUTPUT, GITHUB_STEP_SUMMARY   set by GitHub (default: standard output)
#   GH_TOKEN, GITHUB_REPOSITORY, PR_NUMBER   for `comment` (gh, preinstalled on GitHub's runners)
set -euo pipefail

HEAD_DIR=$(cd "${HEAD_DIR:-.}" && pwd)
ORCHARD=${ORCHARD:-orchard}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
base="$WORK/base"
summary="$WORK/summary.md"
MARKER="<!-- orchard-verdict -->"

output() { echo "$1" >> "${GITHUB_OUTPUT:-/dev/stdout}"; }

# The calibration is made from the BASE's suite (with the facts its expect_file
# names), on this machine, confined as now: its key is computed by orchard from
# exactly those, so a restored calibration always fits, and a pull request that
# edits the suite neither spoils the key of the next one nor gets a stale file.
key() {
  : "${BASE_SHA:?BASE_SHA: the commit to compare against}"
  : "${SUITE:?SUITE: the suite file, relative to a checkout}"
  [ -d "$base" ] || git -C "$HEAD_DIR" worktree add --quiet --detach "$base" "$BASE_SHA"
  output "key=orchard-calibration-$("$ORCHARD" calibration-key --suite "$base/$SUITE")"
}

judge() {
  : "${BINARY:?BINARY: the built binary, relative to a checkout}"
  [ -d "$base" ] || key > /dev/null
  trap 'git -C "$HEAD_DIR" worktree remove --force "$base" >/dev/null 2>&1 || true' EXIT
  echo "::group::build base $BASE_SHA and head $(git -C "$HEAD_DIR" rev-parse --short HEAD)"
  (cd "$base" && sh -c "${BUILD:-make}")
  (cd "$HEAD_DIR" && sh -c "${BUILD:-make}")
  echo "::endgroup::"

  local fail_on=${FAIL_ON:-regressed} status=0
  local args=(verdict --suite "$base/$SUITE" --baseline "$base/$BINARY" --candidate "$HEAD_DIR/$BINARY"
              --json --fail-on "$fail_on" --results "$WORK/results"
              --export-markdown "$WORK/verdict.md" --export-json "$WORK/verdict.json")
  [ -n "${RUNS:-}" ] && args+=(--runs "$RUNS")
  [ -n "${CALIBRATION:-}" ] && args+=(--calibration "$CALIBRATION")
  "$ORCHARD" "${args[@]}" > "$WORK/verdict.stdout.json" || status=$?
  if [ -s "$WORK/verdict.md" ]; then
    cp "$WORK/verdict.md" "$summary"
  else
    echo "orchard verdict gave no verdict (exit $status); see the job's log" > "$summary"
  fi
  cat "$summary" >> "${GITHUB_STEP_SUMMARY:-/dev/stdout}"
  # saved whatever the verdict: a REGRESSED pull request calibrated too
  [ -n "${CALIBRATION:-}" ] && [ -s "$CALIBRATION" ] && output "calibrated=true"
  local word
  word=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$WORK/verdict.json" \
         2>/dev/null) || word=
  output "verdict=$word"
  [ -s "$WORK/verdict.json" ] && annotate "$WORK/verdict.json"
  echo "verdict: ${word:-none} (exit $status, --fail-on $fail_on)"
  return "$status"
}

# GitHub's annotations, shown on the run's page and the pull request's checks: an error for each regressed
# metric, a warning for each inconclusive one, a notice for orchard's advice (what to measure instead of a timing
# metric too noisy to decide, such as instruction counts where valgrind is installed).
annotate() {
  python3 - "$1" <<'PY' || true
import json, sys
verdict = json.load(open(sys.argv[1]))
for metric in verdict.get("metrics", []):
    level = {"regressed": "error", "inconclusive": "warning"}.get(metric["verdict"])
    if level:
        effect = metric.get("effect_percent")
        interval = metric.get("interval_percent") or [None, None]
        said = "" if effect is None else f" by {effect:+.2f}%"
        said += "" if None in interval else f" (interval [{interval[0]:+.2f}%, {interval[1]:+.2f}%])"
        print(f"::{level} title=orchard: {metric['key']} {metric['verdict']}::{metric['key']} {metric['verdict']}"
              f"{said}, noise floor {metric['floor_percent']:.2f}%, {metric['n']} pairs")
for advice in verdict.get("advice", []):
    print(f"::notice title=orchard: advice::{advice['line']}")
PY
}

# One comment per pull request, found by its first line and edited in place.
comment() {
  : "${GITHUB_REPOSITORY:?GITHUB_REPOSITORY: owner/name}" "${PR_NUMBER:?PR_NUMBER: the pull request}"
  [ -s "$summary" ] || { echo "no summary to post ($summary)"; return 0; }
  { echo "$MARKER"; cat "$summary"; } > "$WORK/comment.md"
  local id
  id=$(gh api --paginate "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" \
         --jq ".[] | select(.body | startswith(\"$MARKER\")) | .id" | head -n 1) || id=
  if [ -n "$id" ]; then
    gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$WORK/comment.md" > /dev/null \
      && echo "updated the verdict comment $id" && return
  else
    gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" -F "body=@$WORK/comment.md" \
      > /dev/null && echo "posted the verdict comment" && return
  fi
  # a pull request from a fork gets a read-only token: the step summary still has the verdict
  echo "::warning::could not comment on pull request $PR_NUMBER (needs pull-requests: write)"
}

case "${1:-all}" in
  key) key ;;
  judge) judge ;;
  comment) comment ;;
  all) key && judge ;;
  *) echo "verdict.sh: unknown phase '$1' (key, judge, comment)" >&2; exit 2 ;;
esac
