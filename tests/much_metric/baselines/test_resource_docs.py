"""docs/extending.md lists the resources of the one table (name, flag, words), in its order: the page cannot drift
from the code."""

from __future__ import annotations

import re
from pathlib import Path

from much_metric.baselines.resource_table import RESOURCE_TABLE

PAGE = Path(__file__).resolve().parents[3] / "docs" / "extending.md"


def test_the_resources_section_lists_the_table():
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Resources"):]
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| (.*?) \|$", section, re.M)
    assert [name for name, _, _ in rows] == [entry.name for entry in RESOURCE_TABLE]
    for (name, flag, words), entry in zip(rows, RESOURCE_TABLE, strict=True):
        assert flag == (f"`{entry.flag}`" if entry.flag else flag), name
        assert entry.flag is not None or flag.startswith("(")  # given another way, said in parentheses
        assert words == entry.missing, name
