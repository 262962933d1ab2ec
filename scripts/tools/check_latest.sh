#!/usr/bin/env bash
# Drift check: resolves the test extra at the newest versions the package index serves (within pyproject.toml's and builder/requirements.txt's ranges),
# runs the whole suite against them in a throw-away venv, and prints what broke and which versions moved from the
# test lock. Run it before regenerating the lock (scripts/tools/lock_test_env.sh) and now and then, so a dependency's new
# release breaks here before it breaks a user. Not part of CI (it resolves the moving index on purpose).
#
#   bash scripts/tools/check_latest.sh [pytest args]      # exit status: the suite's
# torch stays at the lock's version (the CPU build); MUCH_LOCK_TORCH=VERSION tries another.
set -uo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
MUCH_LOCK_TORCH=${MUCH_LOCK_TORCH:-$(sed -n 's/^torch==//p' constraints/test.txt)} \
    bash scripts/tools/lock_test_env.sh "$work/latest.txt" || { echo "check_latest.sh: the newest versions do not even install"; exit 1; }
echo "== versions that moved from constraints/test.txt (- lock, + newest)"
diff <(grep -v '^#' constraints/test.txt) <(grep -v '^#' "$work/latest.txt") | grep -E '^[<>]' \
    | sed -e 's/^</-/' -e 's/^>/+/' || echo "(none)"
echo "== test suite on the newest versions"
unset VIRTUAL_ENV
MUCH_TEST_LOCK="$work/latest.txt" MUCH_TEST_VENV="$work/venv" bash scripts/run_tests.sh -rfE "$@" | tee "$work/suite.log"
status=${PIPESTATUS[0]}
echo "== what broke"
grep -E '^(FAILED|ERROR) ' "$work/suite.log" || { [ "$status" = 0 ] && echo "nothing: the suite passes on the newest versions"; }
exit "$status"
