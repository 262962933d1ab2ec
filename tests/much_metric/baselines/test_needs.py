"""What a method needs, declared once in its registry entry (issue #48): the depth of top-k it reads and the
resources it takes, one table of resource kinds, and the words every table uses for them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from much_metric.baselines import Baseline, ResourceOptions, resolve
from much_metric.baselines.needs import declared_needs, needs_text, unmet_needs
from much_metric.baselines.registry import RESOURCES, available


def _noop(arrays, **_):
    return np.zeros(arrays.n_tokens)


def test_each_resource_kind_is_one_entry_with_its_words_and_its_field():
    """A new kind is one entry of RESOURCES (and its ResourceOptions field, which loads it)."""
    assert set(RESOURCES) == {f.name for f in dataclasses.fields(ResourceOptions)}
    assert all(isinstance(text, str) and text for text in RESOURCES.values())
    with pytest.raises(ValueError, match="unknown needs.*telepathy"):
        Baseline(name="x", compute=_noop, needs=("telepathy",))


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
