#!/usr/bin/env bash
# Checks that pyproject.toml's [project] dependencies lower bounds are true: installs every core dependency at exactly its
# lower bound (`>=X` read as `==X`) in a throw-away venv, then runs the main job (`much run --source sample`) and the
# core's tests (loader, scoring, segmentation, the probability baselines) on that environment. A bound that cannot
# be installed together with the others, or under which something fails, must be raised in pyproject.toml.
# Slow (a full resolution of old wheels) and run by hand when a bound changes, not in CI.
#
#   bash scripts/tools/check_lower_bounds.sh [pytest args]
set -uo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# install_requires as written, each `name>=X` turned into `name==X`
python - "$work/lower.txt" <<'PY'
import re, sys, tomllib
with open("pyproject.toml", "rb") as file:
    lines = tomllib.load(file)["project"]["dependencies"]
pins = []
for line in lines:
    match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([0-9][^,;\s]*)", line)
    if not match:
        sys.exit(f"check_lower_bounds.sh: cannot read a lower bound from {line!r}")
    pins.append(f"{match.group(1)}=={match.group(2)}")
open(sys.argv[1], "w").write("\n".join(pins) + "\n")
print("lower bounds:", " ".join(pins))
PY
[ $? = 0 ] || exit 1
python -m venv "$work/venv"
py="$work/venv/bin/python"
# pytest/hypothesis to run the tests, scipy/scikit-learn because some core tests compare with them: resolved at
# versions compatible with the pinned bounds.
if ! "$py" -m pip install -q -c "$work/lower.txt" -e . pytest hypothesis scipy scikit-learn 2> "$work/pip.err"; then
    grep -vE "^WARNING: Location" "$work/pip.err" | tail -25
    echo "check_lower_bounds.sh: the lower bounds cannot be installed together (above: pip's reason)"
    exit 1
fi
echo "== installed core versions"
"$py" -m pip freeze | grep -iE "^($(sed 's/==.*//' "$work/lower.txt" | paste -sd'|'))=="
echo "== much run --source sample"
HF_HUB_OFFLINE=1 "$work/venv/bin/much" run --source sample --bootstrap 0 --no-progress || { echo "check_lower_bounds.sh: much run failed"; exit 1; }
echo "== core tests"
"$py" -m pytest -q -p no:cacheprovider tests/much_dataset tests/much_metric/scoring tests/much_metric/segmentation \
    tests/much_metric/baselines/test_baselines_probability.py "$@"
