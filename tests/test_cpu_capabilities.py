"""scripts/tools/check_cpu_capabilities.sh reruns the float-comparing tests under another torch kernel path: every
test it names exists (a renamed test would drop out of the check in silence), and CI runs its stored-probability
part."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "tools" / "check_cpu_capabilities.sh"


def _named(array: str) -> list[str]:
    body = re.search(rf"^{array}=\((.*?)^\)", SCRIPT.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return body.group(1).split()


def test_every_test_the_check_names_exists():
    named = _named("STORED") + _named("SAME_MACHINE")
    assert len(named) > 10
    missing = []
    for test in named:
        path, _, function = test.partition("::")
        if not (REPO / path).is_file():
            missing.append(test)
        elif function and not re.search(rf"^def {function}\(", (REPO / path).read_text(encoding="utf-8"),
                                        flags=re.MULTILINE):
            missing.append(test)
    assert missing == []


def test_ci_runs_the_stored_probability_tests_under_avx2():
    assert "scripts/tools/check_cpu_capabilities.sh --stored avx2" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "tests/builder/test_replay.py" in _named("STORED")
