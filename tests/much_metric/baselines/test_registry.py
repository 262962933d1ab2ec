"""The baseline registry: patterns, validation, run-time registration and the shape contract of ``compute``."""

from __future__ import annotations

import numpy as np
import pytest

from much_dataset import synthetic
from much_metric.baselines import (
    Baseline,
    ResourceOptions,
    available,
    compute_signals,
    register,
    resolve,
    signal_groups,
    token_arrays,
    unregister,
)
from much_metric.baselines.registry import expand_signals


def test_builtins_are_listed_in_table3_order():
    names = list(available())
    table3 = ["ccp_{delta}_{sigma}{suffix}", "sar_{sigma}{suffix}", "max_likelihood", "token_likelihood",
              "token_entropy_{delta}"]
    assert [name for name in names if name in table3] == table3
    assert "ktc" in names


def test_patterns_resolve_with_typed_parameters():
    assert resolve("token_entropy_10").params == {"delta": 10}
    assert resolve("ccp_24_3").params == {"delta": 24, "sigma": 3, "suffix": ""}
    assert resolve("token_entropy_10").display == "Token Entropy-10"
    with pytest.raises(ValueError, match="unknown signal"):
        resolve("no_such_method")
    with pytest.raises(ValueError, match="delta"):
        resolve("token_entropy_25")


def test_groups_expand_and_deduplicate():
    assert expand_signals(["table3"]) == list(signal_groups()["table3"])
    assert expand_signals(["max_likelihood,table3"])[0] == "max_likelihood"
    assert len(expand_signals(["table3", "table3"])) == 5
    assert "ccp_10_8" not in signal_groups()["all-probability"]
    with pytest.raises(ValueError):
        expand_signals([" , "])


@pytest.mark.parametrize("bad", [dict(name="has space"), dict(needs=("gpu",)), dict(compute=42),
                                 dict(name="x_{a}", params={"b": "[0-9]+"})])
def test_baseline_arguments_are_checked(bad):
    kwargs = dict(name="ok_name", compute=lambda arrays: np.zeros(arrays.n_tokens))
    kwargs.update(bad)
    with pytest.raises((ValueError, TypeError)):
        Baseline(**kwargs)


def test_register_runs_a_new_method_through_the_runner_and_checks_its_output():
    rows = synthetic.make_rows(6, seed=3)
    arrays = token_arrays(rows)
    baseline = Baseline(name="first_candidate_{scale}", compute=lambda a, scale: scale * (1 - a.probabilities[:, 0]),
                        display="First x{scale}")
    register(baseline)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register(baseline)
        runs = compute_signals(rows, ["first_candidate_2"], progress=False)
        flat = np.concatenate([runs["first_candidate_2"].values[g] for g in arrays.generation_ids])
        np.testing.assert_allclose(flat, 2 * (1 - arrays.probabilities[:, 0]))
        assert runs["first_candidate_2"].spec.display == "First x2"
        register(Baseline(name="first_candidate_{scale}", compute=lambda a, scale: np.zeros(3)), replace=True)
        with pytest.raises(ValueError, match="token scores"):
            compute_signals(rows, ["first_candidate_1"], progress=False)
        register(Baseline(name="first_candidate_{scale}", compute=lambda a, scale: [np.zeros(1)] * a.n_samples),
                 replace=True)
        with pytest.raises(ValueError, match="generation_id"):
            compute_signals(rows, ["first_candidate_1"], progress=False)
    finally:
        unregister("first_candidate_{scale}")
    with pytest.raises(ValueError, match="unknown signal"):
        resolve("first_candidate_2")


def test_a_missing_resource_is_named():
    with pytest.raises(ValueError, match="NLI model"):
        compute_signals(synthetic.make_rows(2, seed=1), ["sar_3"],
                        resources=ResourceOptions(tokenizer=lambda ids: ""), progress=False)
