"""The repository holds the product, not its history or its machine (docs/decisions.md#no-work-logs): no file names a
path of the machine it was made on, no work logs, and the scripts sit by kind (docs/decisions.md#scripts-layout)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: An absolute path of a development machine: a home or work folder, a named entry of /tmp, macOS's temporary
#: folders, a Windows user folder. Not matched: system paths a tool legitimately names (/usr/bin/chromium,
#: /dev/null, /proc/self/fd/1, /etc/...), placeholders (/path/to/x, /scratch/me/...), URL paths (preceded by a host)
#: and relative paths (``$ROOT/work/x``, ``out/work``).
MACHINE_PATH = re.compile(
    # (written so that this file's own source matches nothing: [s] and [e] keep the literals apart)
    r"(?<![\w$}.~/\\-])(?:/(?:work|root|workspace)/|/home/[\w.-]+/|/Users/[\w.-]+/|/tmp/[\w.-]+|/var/folder[s]/"
    r"|/privat[e]/var/)|\b[A-Za-z]:\\+Users\\+"
)
#: Folders of a checkout that are not the product (git-ignored builds, environments, test assets).
_NOT_TRACKED = {".git", ".cache", "site", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache",
                ".hypothesis"}


def tracked_files(root: Path = REPO) -> list[Path]:
    """The files git tracks in ``root`` (every file but ignored folders when git or the history is absent)."""
    if shutil.which("git") and (root / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
        return sorted(root / name for name in listed.decode("utf-8").split("\0") if name)
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [s for s in subfolders if s not in _NOT_TRACKED and not s.startswith(".venv")
                         and not s.endswith(".egg-info")]
        found += [Path(folder) / name for name in files]
    return sorted(found)


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, path) of every absolute path of a development machine in ``text``."""
    return [(number, match.group(0)) for number, line in enumerate(text.splitlines(), 1)
            for match in MACHINE_PATH.finditer(line)]


def test_the_path_check_tells_machine_paths_from_legitimate_ones():
    root = "/"  # the examples are built, so that this file itself names no machine path
    machine = [f"{root}work/venv-vllm/bin/python", f"see {root}root/.pyenv/versions", f"--out {root}tmp/packs_en",
               f"{root}home/alice/x", f"{root}Users/bob/much", f"{root}var/folders/xy/T/a", "C:" + "\\Users\\carol",
               f"({root}tmp/x)", f"`{root}work/main`"]
    legitimate = ["/usr/bin/chromium", "/dev/null", "/proc/self/fd/1", "/etc/evil.jsonl", "$ROOT/work/$NAME",
                  "https://example.org/work/x", "out/work/shard", "/path/to/much_metric", "/scratch/me/much", "/tmp",
                  "tmp_path / 'x'", "~/nonexistent_much", ".venv-vllm/bin/python", "/data/much-leaderboard"]
    assert [len(machine_paths(text)) for text in machine] == [1] * len(machine)
    assert [text for text in legitimate if machine_paths(text)] == []


def test_no_file_names_a_path_of_a_development_machine():
    """Every tracked text file (code, docs, benchmark outputs, data cards): a path that exists on one machine only
    is wrong everywhere else; write it relative (``.venv-vllm/bin/python``) or as a placeholder (``--work DIR``)."""
    found = []
    for path in tracked_files():
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary: parquet shards, npz, gz
            continue
        for number, hit in machine_paths(data.decode("utf-8", errors="replace")):
            found.append(f"{path.relative_to(REPO)}:{number}: {hit}")
    assert found == [], "absolute paths of a development machine:\n" + "\n".join(found)


def test_no_work_logs():
    """Status lives in commit messages and the issue notes, decisions in docs/decisions.md, numbers in BENCHMARKS.md."""
    logs = [str(path.relative_to(REPO)) for path in tracked_files()
            if path.relative_to(REPO).parts[0] == "notes" or re.fullmatch(r"(?i)notes?([_-].*)?\.(md|txt)", path.name)]
    assert logs == []


#: The entry points the README, the docs and CI name, kept at the top of scripts/ (docs/decisions.md#scripts-layout).
SCRIPT_ENTRY_POINTS = {"run_tests.sh", "run_vllm_tests.sh", "run_peer_tests.sh", "build_docs.sh",
                       "fetch_test_assets.sh"}
SCRIPT_FOLDERS = {"data", "tools", "cluster"}


def test_scripts_are_sorted_by_kind():
    top = {path.name for path in (REPO / "scripts").iterdir() if path.name != "__pycache__"}
    assert top == SCRIPT_ENTRY_POINTS | SCRIPT_FOLDERS
    assert sorted(path.name for path in (REPO / "scripts" / "cluster").iterdir() if path.suffix != ".sbatch") == []
    benchmarks = {path.stem for path in (REPO / "benchmarks").glob("*.py")}
    helpers = {name for name in benchmarks if not name.startswith("bench_")}
    # every module beside the benchmarks that is not a benchmark is imported by one
    importers = {name: [path.name for path in (REPO / "benchmarks").glob("bench_*.py")
                        if re.search(rf"\b(?:import|from) {name}\b", path.read_text(encoding="utf-8"))]
                 for name in helpers}
    assert {name: users for name, users in importers.items() if not users} == {}


def _runner_table() -> dict[str, str]:
    text = (REPO / "benchmarks" / "run_benchmarks.sh").read_text(encoding="utf-8")
    return dict(re.findall(r'^\s+"(\w+)\|(\w+)\|', text, flags=re.MULTILINE))


def test_the_benchmark_runner_runs_every_benchmark_or_says_why_not():
    table = _runner_table()
    scripts = {path.stem.removeprefix("bench_") for path in (REPO / "benchmarks").glob("bench_*.py")}
    assert set(table) == scripts, "add each benchmarks/bench_<name>.py to run_benchmarks.sh's BENCHMARKS table"
    env = {**os.environ, "VLLM_VENV": "no-such-venv", "PEERS_VENV": "no-such-venv"}
    listed = subprocess.run(["bash", str(REPO / "benchmarks" / "run_benchmarks.sh"), "--list"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()
    lines = {re.match(r"(?:run |skip) bench_(\w+)", line).group(1): line for line in listed}
    assert set(lines) == scripts
    for name, kind in table.items():
        if kind in ("tee", "self", "engines"):  # engines: the vLLM paths say "not measured" themselves
            assert lines[name].startswith("run "), lines[name]
        elif kind in ("vllm", "peers", "hand"):
            assert re.fullmatch(rf"skip bench_{name}: needs .+", lines[name]), lines[name]


@pytest.mark.parametrize("path", [".ci/run", "README.md", "docs/testing.md", "docs/development.md"])
def test_every_script_a_document_names_exists(path):
    text = (REPO / path).read_text(encoding="utf-8")
    named = set(re.findall(r"\b((?:scripts|benchmarks)/[\w./-]+\.(?:sh|py|sbatch))\b", text))
    assert named and sorted(name for name in named if not (REPO / name).is_file()) == []


def test_every_script_finds_the_repository_root_from_its_folder():
    """A script moved to another folder must not start from the wrong root (``cd "$(dirname "$0")/.."`` from
    scripts/tools/ is scripts/, and ``Path(__file__).parents[1]`` likewise)."""
    wrong = []
    for path in [*(REPO / "scripts").rglob("*.sh"), *(REPO / "benchmarks").glob("*.sh")]:
        for relative in re.findall(r'cd "\$\(dirname "\$0"\)/([./]+)"', path.read_text(encoding="utf-8")):
            if (path.parent / relative).resolve() != REPO:
                wrong.append(f"{path.relative_to(REPO)}: cd .../{relative}")
    for path in [*(REPO / "scripts").rglob("*.py"), *(REPO / "benchmarks").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        depths = [int(depth) for depth in re.findall(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d)\]", text)]
        depths += [len(chain) // len(".parent") - 1
                   for chain in re.findall(r"Path\(__file__\)\.resolve\(\)((?:\.parent)+)(?![\w\[])", text)]
        wrong += [f"{path.relative_to(REPO)}: {depth + 1} folders up" for depth in depths
                  if path.parents[depth] != REPO and path.parents[depth] != path.parent]
    assert wrong == []


def test_no_lock_file_is_tracked_and_new_ones_are_ignored():
    """The builder's locks (builder/_locks.py: ``.NAME.lock`` beside what it writes) belong to a run, not to the
    repository: none is tracked, and git ignores one written into a pack of the checkout."""
    from builder._locks import lock_path

    locks = [str(path.relative_to(REPO)) for path in tracked_files() if path.name.endswith(".lock")]
    assert locks == []
    if shutil.which("git") and (REPO / ".git").exists():
        fresh = lock_path(REPO / "much_dataset" / "sample" / "samples" / "manifest.json").relative_to(REPO)
        assert subprocess.run(["git", "check-ignore", "-q", str(fresh)], cwd=REPO).returncode == 0
