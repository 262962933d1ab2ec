"""The switches that make a missing optional tool fail its tests in CI instead of skipping them (tests/_tools.py):
each switch turns the skip into a failure, CI sets every switch where it installed the tool, and no test skips for a
switched tool without going through the helper."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._tools import SWITCHES, require, require_module

REPO = Path(__file__).resolve().parents[1]
MISSING = "much_no_such_module_59"  # a module no environment has
# the scripts CI runs, where the switches are set
CI_SCRIPTS = (".ci/run", "scripts/run_tests.sh", "scripts/run_vllm_tests.sh", "scripts/run_peer_tests.sh")


@pytest.mark.parametrize("tool", sorted(SWITCHES))
def test_a_missing_tool_skips_without_its_switch_and_fails_with_it(tool, monkeypatch):
    monkeypatch.delenv(SWITCHES[tool], raising=False)
    require(tool, True, "present")  # nothing happens when the tool is there
    with pytest.raises(pytest.skip.Exception, match="not here"):
        require(tool, False, "not here")
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require_module(tool, MISSING, "nowhere")

    monkeypatch.setenv(SWITCHES[tool], "1")
    require(tool, True, "present")
    with pytest.raises(pytest.fail.Exception, match=f"{SWITCHES[tool]}=1 but not here"):
        require(tool, False, "not here")
    with pytest.raises(pytest.fail.Exception, match=f"{SWITCHES[tool]}=1 but {MISSING} cannot be imported"):
        require_module(tool, MISSING, "nowhere")
    assert require_module(tool, "json", "stdlib").__name__ == "json"


def test_the_switch_fails_a_whole_pytest_run_at_module_level(tmp_path):
    """As the Ray and vLLM test modules use it (a module-level import): a skipped module without the switch, a
    failed run with it."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the repository's configuration and conftest
    (tmp_path / "test_needs_ray.py").write_text(
        "from tests._tools import require_module\n"
        f"ray = require_module('ray', '{MISSING}', 'installed elsewhere')\n\n"
        "def test_uses_it():\n    assert ray\n")

    def run(switch: str) -> subprocess.CompletedProcess:
        env = {"PYTHONPATH": str(REPO), "PATH": "", "MUCH_REQUIRE_RAY": switch}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    skipped, failed = run("0"), run("1")
    assert skipped.returncode == 5 and "1 skipped" in skipped.stdout, skipped.stdout  # 5: nothing left to run
    assert failed.returncode != 0 and "MUCH_REQUIRE_RAY=1 but" in failed.stdout, failed.stdout


def test_ci_sets_every_switch_and_only_known_ones():
    text = "\n".join((REPO / script).read_text() for script in CI_SCRIPTS)
    set_in_ci = set(re.findall(r"\b(MUCH_REQUIRE_[A-Z]+)=1\b", text))
    assert set_in_ci == set(SWITCHES.values())


# How a test used to skip for a switched tool by hand (each is now require/require_module's job).
_BY_HAND = re.compile(r"importorskip\(\s*[\"'](?:ray|vllm|playwright|lm_polygraph|uqlm)\b"
                      r"|pytest\.skip\([^)]*\b(?:ruff|[Cc]hromium|[Rr]ay|vLLM)\b")


def test_no_test_skips_for_a_switched_tool_by_hand():
    by_hand = [str(path.relative_to(REPO)) for path in sorted((REPO / "tests").rglob("*.py"))
               if path.name != Path(__file__).name and _BY_HAND.search(path.read_text(encoding="utf-8"))]
    assert by_hand == []
