"""scripts/replace_spec_citations.py: citations of the reference specification become docs anchors that exist."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference-behaviour.md"


def _script():
    path = ROOT / "scripts" / "replace_spec_citations.py"
    spec = importlib.util.spec_from_file_location("replace_spec_citations", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page_anchors() -> set[str]:
    text = PAGE.read_text(encoding="utf-8")
    return set(re.findall(r"\{#([\w-]+)\}", text)) | set(re.findall(r'<a id="([\w-]+)"></a>', text))


def test_every_mapped_section_has_its_anchor_on_the_page():
    missing = sorted(set(_script().ANCHORS.values()) - _page_anchors())
    assert not missing, f"docs/reference-behaviour.md lacks the anchors {missing}"


def test_citation_forms_are_rewritten_to_anchors():
    script = _script()
    cases = {
        "(" + "spec 9.2)": "(docs/reference-behaviour.md#stopword-rule)",
        "spec section 5, step 3": "docs/reference-behaviour.md#segmentation, step 3",
        "spec sections 2 and 13": "docs/reference-behaviour.md#hub-columns",
        "(spec 1.1, 1.2, 2.3)": "(docs/reference-behaviour.md#config-ids, #question-id, #generation-configs)",
        "spec 9.4, bug 11.16": "docs/reference-behaviour.md#metrics, #partial-pr-auc",
        "spec 11, point 4": "docs/reference-behaviour.md#ktc-options",
        "spec 4.3-4.4:": "docs/reference-behaviour.md#prompt, #sampling:",
        "spec 9.2/11.11;": "docs/reference-behaviour.md#stopword-rule;",
        "spec 2.5)": "docs/reference-behaviour.md#export)",
        "(spec 4.5, 24 values)": "(docs/reference-behaviour.md#captured-distribution, 24 values)",
        "Spec 8 pair by pair": "docs/reference-behaviour.md#signals pair by pair",
    }
    for before, after in cases.items():
        assert script.rewrite(before) == after, before
    assert script.find_citations([]) == []


def test_reflow_keeps_the_code_and_the_limit():
    """Long lines made by the rewrite are cut inside comments and strings only; the code is unchanged."""
    script = _script()
    source = (
        'def f(parser):\n'
        '    """A docstring citing the thing (' + "spec 9.2" + ') and more words to pass the limit of the line."""\n'
        '    parser.add_argument("--x", help="a help text citing (' + "spec 4.5" + ') with words to pass the limit")\n'
        '    return parser  # a trailing comment citing (' + "spec 2.1" + ') long enough to pass the line limit\n'
        '#: A comment block line citing (' + "spec 1.1, 1.2, 2.3" + ') that is long enough to need a cut here, yes.\n'
    )
    rewritten = script.rewrite(source)
    reflowed, too_long = script.reflow_python(rewritten)
    assert too_long == []
    assert all(len(line) <= script.LINE_LENGTH for line in reflowed.splitlines()), reflowed
    assert script._strings_normalised(reflowed) == script._strings_normalised(rewritten)
    help_text = [node.value for node in ast.walk(ast.parse(reflowed))
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("a help")]
    expected = "a help text citing (docs/reference-behaviour.md#captured-distribution) with words to pass the limit"
    assert help_text == [expected]
    assert "#: A comment block" in reflowed and "\n#: " in reflowed.split("#: A comment block")[1]


def test_no_spec_citations_remain_and_every_cited_anchor_exists():
    """much_dataset/, much_metric/, builder/ (and scripts, tests, README, BENCHMARKS) cite the docs, not the spec."""
    script = _script()
    paths = list(script.DEFAULT_PATHS)
    remaining = script.find_citations(paths)
    assert not remaining, "run python scripts/replace_spec_citations.py; left:\n" + "\n".join(remaining)
    cited: set[str] = set()
    for path in script.files(paths):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"docs/reference-behaviour\.md#([\w-]+)((?:,\s*(?:#:?\s*)?#[\w-]+)*)", text):
            cited.add(match.group(1))
            cited.update(re.findall(r"#([\w-]+)", match.group(2)))
    assert {"stopword-rule", "config-ids", "signals"} <= cited  # the rewrite happened
    missing = sorted(cited - _page_anchors())
    assert not missing, f"cited anchors missing from docs/reference-behaviour.md: {missing}"
