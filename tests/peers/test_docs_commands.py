"""docs/peers.md's commands, as written, in the peers' venv (the main docs-commands test, tests/test_docs_commands.py,
leaves them here): ``.venv-peers/bin/much run ...`` (the venv's own ``much`` when the venv is elsewhere, ``VENV=``)
and the ``$ much run ...`` of the refused-estimator example, whose shown first line must be its error's start."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.peers.conftest import require
from tests.test_docs_commands import page_steps

require("lm_polygraph")
require("uqlm")

REPO = Path(__file__).resolve().parents[2]


def _argv(command: str) -> list[str]:
    argv = shlex.split(command)
    much = Path(sys.executable).parent / "much"
    if argv[0] in ("much", ".venv-peers/bin/much") and not (REPO / argv[0]).exists():
        argv[0] = str(much)  # this venv's console script: the same program the page names
    return argv


def test_the_peers_page_commands_run_as_written(tmp_path):
    steps = [step for step in page_steps("docs/peers.md") if "peers' venv" in step.why]
    runnable = [step for step in steps if "orailix/MUCH" not in step.text]  # bench_peers on MUCH needs the hub
    assert len(runnable) == 2, [step.text for step in steps]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    for step in runnable:
        argv = _argv(step.text)
        if argv[0].startswith(".venv-peers/"):
            argv[0] = str(REPO / argv[0])
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
        output = done.stdout + done.stderr
        if step.expected:  # the refused estimator: exit 2 and the message the page shows
            assert done.returncode == 2, output
            shown = step.expected[0].split("...")[0].rstrip(", ")
            assert shown in output, (shown, output[-2000:])
        else:
            assert done.returncode == 0, output[-3000:]
            assert "LM-Polygraph MaximumClaimProbability" in output and "UQLM sequence_probability" in output
