"""Ceilings that only go down, per package, where the code grows (issue 56): the public names a package offers (the
names in the ``__all__`` of its ``__init__.py`` files) and its functions over 80 lines. The counts
(tests/measure_house.py: ``public_names``, ``long_functions``) may not exceed tests/data/house_ceilings.json; when one
falls, the second test fails and prints the whole file with the new numbers to paste."""

from __future__ import annotations

import json
from pathlib import Path

from tests.measure_house import functions_over, long_functions, public_names

REPO = Path(__file__).resolve().parents[1]
CEILINGS = REPO / "tests" / "data" / "house_ceilings.json"
PACKAGES = ("much_dataset", "much_metric", "builder", "much_leaderboard")
#: A function longer than this many lines counts.
LONG_FUNCTION = 80
MEASURES = {"public names": lambda: public_names(REPO, PACKAGES),
            "functions over 80 lines": lambda: long_functions(REPO, PACKAGES, LONG_FUNCTION)}


def _counts() -> dict[str, dict[str, int]]:
    return {measure: count() for measure, count in MEASURES.items()}


def test_counts_stay_under_their_ceilings():
    ceilings, counts = json.loads(CEILINGS.read_text()), _counts()
    over = {f"{measure} of {package}": f"{n} > {ceilings[measure][package]}"
            for measure, per_package in counts.items() for package, n in per_package.items()
            if n > ceilings[measure][package]}
    long = functions_over(REPO, LONG_FUNCTION, PACKAGES)
    assert over == {}, f"over the ceiling: {over} (a new public name or a long function: keep it private or split " \
                       f"it); functions over {LONG_FUNCTION} lines now: {long}"


def test_ceilings_follow_the_counts_down():
    ceilings, counts = json.loads(CEILINGS.read_text()), _counts()
    below = {f"{measure} of {package}": f"{n} < {ceilings[measure][package]}"
             for measure, per_package in counts.items() for package, n in per_package.items()
             if n < ceilings[measure][package]}
    assert below == {}, f"counts fell ({below}): paste into {CEILINGS.relative_to(REPO)}:\n" \
                        f"{json.dumps(counts, indent=1)}"


def test_every_package_has_a_ceiling_for_every_measure():
    ceilings = json.loads(CEILINGS.read_text())
    assert {measure: sorted(per_package) for measure, per_package in ceilings.items()} == \
        {measure: sorted(PACKAGES) for measure in MEASURES}


def test_the_counts_see_a_new_public_name_and_a_long_function(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('__all__ = ["a", "b"]\n')
    (package / "sub" / "__init__.py").write_text('_LAZY = {"c": "m", "d": "m"}\n__all__ = ["e", *_LAZY]\n')
    body = "\n".join(f"    x{i} = {i}" for i in range(LONG_FUNCTION))
    (package / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert public_names(tmp_path, ("pkg",)) == {"pkg": 5}
    assert long_functions(tmp_path, ("pkg",), LONG_FUNCTION) == {"pkg": 1}
