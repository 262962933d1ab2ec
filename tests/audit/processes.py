"""Running one command of an audited checkout: its interpreter command line, its environment, and a run in its own
process group under a deadline (used by the harness, ``tests/audit/audit_bad_inputs.py``, and by the fixtures of
``tests/audit/cases.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def command_prefix(repo: Path, program: str) -> list[str]:
    """The interpreter command line of ``much`` / ``builder`` / ``leaderboard`` in ``repo``."""
    if program == "much":
        return [sys.executable, "-m", "much_metric"]
    if program == "builder":
        return [sys.executable, "-m", "builder"]
    if program == "leaderboard":  # its own package on new checkouts, a `much` sub-command on older ones
        if (repo / "much_leaderboard" / "__main__.py").is_file():
            return [sys.executable, "-m", "much_leaderboard"]
        return [sys.executable, "-m", "much_metric", "leaderboard"]
    raise ValueError(f"unknown program {program!r}")


def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], deadline: float,
                memory_gb: float = 0.0) -> tuple[int | None, str, str, float]:
    """Run ``argv`` in its own process group; kill the group at ``deadline`` seconds (rc None).

    ``memory_gb`` > 0 caps the address space (a case that reads /dev/zero must not take the machine's memory).
    """
    start = time.monotonic()

    def limit() -> None:
        if memory_gb > 0:
            import resource

            cap = int(memory_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                   start_new_session=True, preexec_fn=limit if memory_gb > 0 else None)
        try:
            rc: int | None = process.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the command and anything it started
            except ProcessLookupError:
                pass
            process.wait()
        out.seek(0)
        err.seek(0)
        return (rc, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                time.monotonic() - start)


def subprocess_env(repo: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", NO_COLOR="1",
               PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    env.pop("MUCH_DEBUG", None)
    return env
