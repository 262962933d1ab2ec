"""Ruff ceilings that only go down, per path: the counts of PLR0913 (too many arguments), C901 (too complex), RUF100
(unused ``noqa``) and D102 (public method without docstring) in each package and in tests/ may not exceed
tests/data/ruff_ceilings.json (``{path: {rule: ceiling}}``). When a count falls, the second test fails and prints the
whole file with the new numbers to paste."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from tests._tools import require

REPO = Path(__file__).resolve().parents[1]
CEILINGS = REPO / "tests" / "data" / "ruff_ceilings.json"
PATHS = ("much_dataset", "much_metric", "builder", "much_leaderboard", "tests")


def ruff_hits(rules) -> list[dict]:
    ruff = shutil.which("ruff")
    require("ruff", ruff is not None, "ruff is not installed (the test extra installs it)")
    out = subprocess.run([ruff, "check", "--extend-select", ",".join(rules), "--exit-zero", "--output-format", "json",
                          *PATHS], cwd=REPO, capture_output=True, text=True, check=True)
    return [hit for hit in json.loads(out.stdout or "[]") if hit["code"] in rules]


def _path_of(hit: dict) -> str:
    return Path(hit["filename"]).resolve().relative_to(REPO).parts[0]


def ruff_counts(ceilings: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """``{path: {rule: count}}`` for the paths and rules of ``ceilings``."""
    rules = sorted({rule for per_rule in ceilings.values() for rule in per_rule})
    found = Counter((_path_of(hit), hit["code"]) for hit in ruff_hits(rules))
    return {path: {rule: found[path, rule] for rule in per_rule} for path, per_rule in ceilings.items()}


def test_every_path_has_ceilings():
    assert sorted(json.loads(CEILINGS.read_text())) == sorted(PATHS)


def test_counts_stay_under_their_ceilings():
    ceilings = json.loads(CEILINGS.read_text())
    counts = ruff_counts(ceilings)
    over = {f"{rule} in {path}": f"{n} > {ceilings[path][rule]}" for path, per_rule in counts.items()
            for rule, n in per_rule.items() if n > ceilings[path][rule]}
    assert over == {}, f"over the ceiling: {over} (ruff check --extend-select RULE PATH lists them)"


def test_ceilings_follow_the_counts_down():
    ceilings = json.loads(CEILINGS.read_text())
    counts = ruff_counts(ceilings)
    below = {f"{rule} in {path}": f"{n} < {ceilings[path][rule]}" for path, per_rule in counts.items()
             for rule, n in per_rule.items() if n < ceilings[path][rule]}
    assert below == {}, f"counts fell ({below}): paste into {CEILINGS.relative_to(REPO)}:\n" \
                        f"{json.dumps(counts, indent=1)}"
