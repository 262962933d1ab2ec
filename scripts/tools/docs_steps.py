"""The steps of a documentation page, in order: what tests/test_docs_commands.py runs in the test environment and
scripts/tools/check_docs_pages.py runs in a fresh venv per install line (one parser for both).

Commands are the lines of ``bash`` blocks (``\\``-continued lines joined, comments dropped) and the ``$ ...`` lines
of ``text`` blocks (whose output lines, when shown, must appear in the command's output); the ``python`` blocks of
the pages in :data:`PYTHON_PAGES` are steps too. What is not run says why, on the page:

* a block whose first comment line starts ``# needs a GPU``, ``# needs the hub``, ``# needs vLLM's environment``,
  ``# needs the test environment`` or ``# not run:`` (a synopsis with placeholders) is listed with that comment;
* a page holding ``<!-- not run: REASON -->`` is listed whole with REASON (a reference list or the set-up itself);
* ``pip install`` lines are the page's installs (kind ``install``): the fresh-venv runner builds its venv from them,
  the test environment has them already; a page without one inherits the README's quick-start install,
  :data:`QUICK_START`;
* the CI scripts themselves and the peers' commands (their own venv: tests/peers/test_docs_commands.py).
"""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: where a page's `much-leaderboard serve` answers (the board's default port)
SERVER_URL = "http://127.0.0.1:7860"
#: Pages whose python blocks are steps too (the others are covered elsewhere or are peers' bug reproductions).
PYTHON_PAGES = ("docs/internals.md", "docs/leaderboard.md", "docs/conformal.md")
#: A block whose first comment line starts like this is not run; the comment says why.
MARK = re.compile(r"^#\s*(needs (a GPU|the hub|vLLM's environment|the test environment)|not run:)")
#: A page holding this comment (at the start of a line) is not run at all; the comment says why.
PAGE_MARK = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->", re.S | re.M)
#: The install a page without its own inherits: the README's first (quick-start) one.
QUICK_START = "pip install ."
CI_SCRIPTS = ("bash scripts/run_tests.sh", "bash scripts/run_peer_tests.sh")


@dataclass
class Step:
    page: str
    kind: str  # "command", "python", "install" or "skip"
    text: str
    why: str = ""
    expected: tuple[str, ...] = ()  # output lines shown under a "$ command" of a text block


def pages(root: Path = ROOT) -> list[str]:
    """README.md and every page of docs/, as paths relative to ``root``."""
    return ["README.md", *sorted(path.relative_to(root).as_posix() for path in (root / "docs").glob("*.md"))]


def _logical_lines(block: str) -> list[str]:
    lines, current = [], ""
    for raw in block.splitlines():
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        lines.append(current)
        current = ""
    return [line for line in lines if line.strip()]


def _strip_comment(line: str) -> str:
    return re.sub(r"\s{2,}#.*$", "", line).strip() if not line.lstrip().startswith("#") else ""


def _classify(page: str, command: str, expected: tuple[str, ...] = ()) -> list[Step]:
    steps = []
    for part in (p.strip() for p in command.split("&&")):
        if part.startswith("pip install"):
            steps.append(Step(page, "install", part))
        elif part in CI_SCRIPTS or part.startswith("bash scripts/run_peer_tests.sh "):
            steps.append(Step(page, "skip", part, "CI's own command (.ci/run runs it)"))
        elif "lmpolygraph:" in part or "uqlm:" in part or part.startswith(".venv-peers/"):
            steps.append(Step(page, "skip", part, "runs in the peers' venv: tests/peers/test_docs_commands.py",
                              expected))
        else:
            steps.append(Step(page, "command", part, expected=expected))
    return steps


def page_steps(page: str, root: Path = ROOT) -> list[Step]:
    """The page's steps in order (see the module docstring)."""
    text = (root / page).read_text(encoding="utf-8")
    whole = PAGE_MARK.search(text)
    steps: list[Step] = []
    for language, block in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if language == "bash":
            comments = [line.strip() for line in block.splitlines() if line.strip().startswith("#")]
            mark = next((c for c in comments[:1] if MARK.match(c)), None)
            for line in _logical_lines(block):
                command = _strip_comment(line)
                if not command:
                    continue
                if mark:
                    steps.append(Step(page, "skip", command, mark.lstrip("# ")))
                else:
                    steps.extend(_classify(page, command))
        elif language == "text":
            lines = block.splitlines()
            for index, line in enumerate(lines):
                if line.startswith("$ "):
                    shown = tuple(out for out in lines[index + 1:] if out.strip())
                    shown = shown[: next((k for k, out in enumerate(shown) if out.startswith("$ ")), len(shown))]
                    steps.extend(_classify(page, line[2:].strip(), shown))
        elif language == "python" and page in PYTHON_PAGES:
            steps.append(Step(page, "python", block))
    if whole:
        reason = " ".join(whole.group(1).split())
        steps = [Step(page, "skip", step.text, step.why or reason) for step in steps]
    return steps


def install_lines(steps: list[Step]) -> tuple[str, ...]:
    """The page's ``pip install`` lines in page order, or the README's quick-start install when it names none (and
    has something to run)."""
    own = tuple(step.text for step in steps if step.kind == "install")
    if own:
        return own
    return (QUICK_START,) if any(step.kind in ("command", "python") for step in steps) else ()


def start_server(argv: list[str], folder: Path, env: dict[str, str]) -> subprocess.Popen:
    """A page's server command started in ``folder``, returned once :data:`SERVER_URL` answers (at most 900 s: a
    loaded machine takes minutes to import the board); its output goes to a log in ``folder``, quoted on failure."""
    log = open(folder / f"server-{time.monotonic_ns()}.log", "w")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(argv, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{' '.join(argv)} exited with {process.returncode}: "
                                 f"{Path(log.name).read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(SERVER_URL + "/", timeout=5) as answer:
                if answer.status == 200:
                    return process
        except OSError:
            time.sleep(2)
    process.kill()
    raise AssertionError(f"{' '.join(argv)}: no page at {SERVER_URL} after 900 s")


def stop_server(process: subprocess.Popen | None) -> None:
    """Stops a server :func:`start_server` started (terminate, then kill after 60 s); nothing for ``None``."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
