"""One copy of each thing that decides a number: MUCH's system prompt (it decides every stored probability) is one
constant of much_dataset.schema, and no other file of the repository writes it out."""

from __future__ import annotations

from pathlib import Path

from much_dataset import schema

REPO = Path(__file__).resolve().parents[1]
#: Where code lives (every ``*.py`` below these).
CODE = ("much_dataset", "much_metric", "builder", "much_leaderboard", "plugins", "benchmarks", "scripts", "tests",
        "app.py")


def _python_files() -> list[Path]:
    found = []
    for name in CODE:
        path = REPO / name
        found += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return found


def test_the_system_prompt_is_written_once():
    # distinctive pieces, taken from the constant so that this file holds no copy either
    pieces = [schema.SYSTEM_PROMPT.split(". ")[1].rstrip("."), schema.BRIEF_SUFFIX.strip().rstrip(".")]
    copies = sorted(f"{path.relative_to(REPO)}: {piece!r}" for path in _python_files()
                    for piece in pieces if piece in path.read_text(encoding="utf-8"))
    assert copies == [f"much_dataset/schema.py: {piece!r}" for piece in sorted(pieces)], copies


def test_every_chat_of_the_toolkit_is_built_from_the_constant():
    from builder import _llm

    system = schema.SYSTEM_PROMPT + schema.BRIEF_SUFFIX
    assert _llm.chat_messages("q") == schema.chat_messages("q") == [{"role": "system", "content": system},
                                                                   {"role": "user", "content": "q"}]
    assert schema.chat_messages("q", brief=False)[0]["content"] == schema.SYSTEM_PROMPT


def test_one_plugin_registry_reads_the_entry_points():
    """The baselines and the detector kinds are one registry type; only it reads installed plugins."""
    from much_metric._plugins import PluginRegistry
    from much_metric.baselines import registry
    from much_metric.learned import KINDS

    assert isinstance(registry._REGISTRY, PluginRegistry) and isinstance(KINDS, PluginRegistry)
    readers = sorted(str(path.relative_to(REPO)) for package in ("much_dataset", "much_metric", "builder",
                                                                  "much_leaderboard")
                     for path in (REPO / package).rglob("*.py") if "entry_points(" in path.read_text(encoding="utf-8"))
    assert readers == ["much_metric/_plugins.py"]
