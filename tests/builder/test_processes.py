"""A builder step stopped by SIGTERM/SIGINT (once or twice) leaves none of the processes it started behind, the way
``generate --engine vllm`` starts vLLM's engine core and workers: a child and a grandchild here
(tests/builder/test_vllm_engine.py kills the real engine)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from builder._processes import descendants

ROOT = Path(__file__).resolve().parents[2]

# A "step" under NoOrphans(subreaper=True), as `python -m builder` runs one: it starts a child that starts a
# grandchild (each a long sleep), prints their pids, then works until stopped. Its exit code is cli.main's.
STEP = textwrap.dedent("""
    import json, signal, subprocess, sys, threading, time
    from builder._processes import NoOrphans
    from much_metric.commands import run_command

    def step():
        child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                                  "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
                                  "print(g.pid, flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
        grandchild = int(child.stdout.readline())
        if sys.argv[1] == "blocked":
            # as vLLM's start-up: the main thread waits in C code and the signal lands on another thread, so
            # Python's handler cannot run until the wait ends
            threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        print(json.dumps([child.pid, grandchild]), flush=True)
        time.sleep(120)
        return 0

    with NoOrphans(subreaper=True, grace=5, unwind=1, prog="builder fake") as guard:
        code = run_command("builder fake", step)
    sys.exit(guard.exit_code(code))
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the processes left behind")
@pytest.mark.parametrize("signals, main_thread", [((signal.SIGTERM,), "running"), ((signal.SIGINT,), "running"),
                                                  ((signal.SIGTERM, signal.SIGTERM), "running"),
                                                  ((signal.SIGTERM,), "blocked"), ((signal.SIGINT,), "blocked")])
def test_a_stopped_step_leaves_no_process_behind(signals, main_thread):
    process = subprocess.Popen([sys.executable, "-c", STEP, main_thread], cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        started = json.loads(process.stdout.readline())
        assert set(started) <= set(descendants(process.pid)) and all(map(_alive, started))
        for signum in signals:  # to the step's pid only, as `kill PID` does: its children get nothing
            os.kill(process.pid, signum)
            time.sleep(0.2)
        code = process.wait(timeout=30)
        deadline = time.monotonic() + 5
        while any(map(_alive, started)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in started if _alive(pid)], f"left behind: {started}"
        assert code == 128 + signals[0]
        assert "builder fake: interrupted" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_ended_step_does_not_stop_what_existed_before_it(tmp_path):
    """A failing step (exit 2) stops what it started, never a process its caller had started before it (a test's
    server, another step's engine)."""
    from builder.cli import main

    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert main(["generate", "--out", str(tmp_path), "--model", "m"]) == 2  # no questions.jsonl
        assert before.poll() is None
    finally:
        before.kill()
        before.wait()
