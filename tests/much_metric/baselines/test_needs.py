"""What a method needs, declared once in its registry entry (issue #48): the depth of top-k it reads and the
resources it takes, one table of resource kinds, and the words every table uses for them."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.baselines import Baseline, Requirements, ResourceOptions, resolve
from much_metric.baselines._baseline import BaselineSpec
from much_metric.baselines.needs import declared_needs, needs_text, unmet_needs
from much_metric.baselines.registry import RESOURCES, available


def _noop(arrays, **_):
    return np.zeros(arrays.n_tokens)


@pytest.fixture
def weather_resource(monkeypatch):
    """A new kind of resource, added the way the docs say: one entry of the resource table (nothing else)."""
    from much_metric.baselines import resource_table

    entry = resource_table.Resource("weather", "the weather report", flag="--weather",
                                    loader="tests.much_metric.baselines.test_needs:_load_weather",
                                    help="a weather report for the weather detector")
    monkeypatch.setattr(resource_table, "RESOURCE_TABLE", (*resource_table.RESOURCE_TABLE, entry))
    monkeypatch.setitem(resource_table._BY_NAME, "weather", entry)
    monkeypatch.setitem(resource_table.RESOURCES, "weather", entry.missing)
    return entry


def _load_weather(value, split):
    return None if value is None else {"report": value.upper(), "rows": None if split is None else len(split)}


def test_a_new_resource_is_one_entry_of_the_table(weather_resource):
    """The entry alone gives the keyword of ResourceOptions, its loading for the methods that need it, the words
    of every table, the ``much run`` flag, and the note when no asked signal reads it."""
    from much_metric.baselines.needs import unmet_needs
    from much_metric.baselines.resource_table import unread_options
    from much_metric.cli import build_parser

    method = Baseline(name="weather_score", compute=_noop, requirements=Requirements(resources=("weather",)))
    spec = BaselineSpec("weather_score", method, {})
    assert unmet_needs(spec) == ("the weather report",)
    options = ResourceOptions(weather="rain")
    assert options.weather == "rain" and options.as_dict()["weather"] == "rain"
    assert options.resolved(None, spec.needs).weather == {"report": "RAIN", "rows": None}
    assert options.resolved(None, ()).weather == "rain"  # not needed: not loaded
    assert build_parser().parse_args(["run", "--weather", "fog"]).weather == "fog"
    assert unread_options(options, needs={"samples"}) == {
        "--weather": "--weather rain is not used: no asked signal reads the weather report"}
    assert unread_options(options, needs={"weather"}) == {}


def test_the_table_is_the_one_list_of_resources():
    from much_metric.baselines.resource_table import RESOURCE_TABLE

    assert list(RESOURCES) == [entry.name for entry in RESOURCE_TABLE]
    assert set(ResourceOptions().as_dict()) == set(RESOURCES)
    assert all(isinstance(text, str) and text for text in RESOURCES.values())
    with pytest.raises(ValueError, match="unknown needs.*telepathy"):
        Baseline(name="x", compute=_noop, requirements=Requirements(resources=("telepathy",)))
    with pytest.raises(ValueError, match="no resource named 'telepathy'; known: tokenizer, nli"):
        ResourceOptions(telepathy=1)


def test_one_requirements_declaration_replaces_needs_top_k_and_needs_of():
    """``requirements`` is the declaration; the old keywords fold into it, never beside it."""
    by_declaration = Baseline(name="x_{delta}", compute=_noop,
                              requirements=Requirements(top_k="delta", resources=("tokenizer",)))
    old_spelling = Baseline(name="x_{delta}", compute=_noop, top_k="delta", needs=("tokenizer",))
    assert by_declaration.requirements == old_spelling.requirements
    assert BaselineSpec("x_7", by_declaration, {"delta": 7}).requirements == Requirements(7, ("tokenizer",))
    per_instance = Baseline(name="y_{n}", compute=_noop,
                            requirements=lambda params: Requirements(params["n"], ("internals",) * (params["n"] > 2)))
    assert BaselineSpec("y_1", per_instance, {"n": 1}).needs == ()
    assert BaselineSpec("y_3", per_instance, {"n": 3}).requirements == Requirements(3, ("internals",))
    with pytest.raises(ValueError, match="give requirements alone; needs is its old spelling"):
        Baseline(name="z", compute=_noop, needs=("nli",), requirements=Requirements())


@pytest.mark.parametrize(("top_k", "message"), [(25, r"top_k must be an integer in \[0, 24\]"),
                                                (-1, r"top_k must be an integer"),
                                                ("depth", "top_k='depth' is not a field of its name")])
def test_a_bad_declaration_fails_when_the_baseline_is_made(top_k, message):
    with pytest.raises(ValueError, match=message):
        Baseline(name="x_{delta}", compute=_noop, top_k=top_k)


def test_the_depth_follows_the_field_or_function_it_names():
    by_field = Baseline(name="x_{delta}", compute=_noop, top_k="delta")
    assert by_field.match("x_7") == {"delta": 7}
    from much_metric.baselines._baseline import BaselineSpec

    assert BaselineSpec("x_7", by_field, {"delta": 7}).top_k == 7
    by_function = Baseline(name="y_{n}", compute=_noop, top_k=lambda params: params["n"] + 1)
    assert BaselineSpec("y_3", by_function, {"n": 3}).top_k == 4
    with pytest.raises(ValueError, match="signal 'y_30': top_k must be an integer in"):
        BaselineSpec("y_30", by_function, {"n": 30}).top_k  # noqa: B018 - the property raises
    assert BaselineSpec("z", Baseline(name="z", compute=_noop), {}).top_k == 24  # undeclared: reads all 24


def test_built_in_declarations():
    depth = {name: resolve(name).top_k for name in ("token_likelihood", "nll", "sar_8", "rauq", "max_likelihood",
                                                    "probability_margin", "token_entropy_5", "ccp_10_8",
                                                    "ccp_no_nli_24", "boosted_prob", "ktc")}
    assert depth == {"token_likelihood": 0, "nll": 0, "sar_8": 0, "rauq": 0, "max_likelihood": 1,
                     "probability_margin": 2, "token_entropy_5": 5, "ccp_10_8": 10, "ccp_no_nli_24": 24,
                     "boosted_prob": 24, "ktc": 24}
    for baseline in available().values():  # every default of every registered method resolves a depth
        for name in baseline.defaults:
            assert 0 <= resolve(name).top_k <= 24


def test_the_words_of_every_table():
    assert declared_needs(resolve("ccp_10_8")) == ("top-10", "the generating LLM's tokenizer", "an NLI model")
    assert declared_needs(resolve("token_likelihood")) == ("the sampled token's probability",)
    assert unmet_needs(resolve("ccp_10_8"), top_k=24, available=("tokenizer", "nli")) == ()
    assert unmet_needs(resolve("ccp_10_8"), top_k=9, available=("tokenizer",)) == ("top-10", "an NLI model")
    assert unmet_needs(resolve("token_entropy_24")) == ()  # no view: the stored 24
    assert needs_text(("top-24",)) == "needs top-24" and needs_text(()) == ""
