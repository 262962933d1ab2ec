"""RAUQ and the previous-token attention score: equal to an independent transcription of the authors' ``rauq.py``
on the same arrays, registered as needing an internals pack, and printed by ``much run --internals PACK``."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from much_metric.baselines import resolve, signal_groups, token_arrays
from much_metric.baselines.methods import rauq as rauq_module
from tests.much_metric.baselines._packs import write_random_pack


# --- an independent, straightforward transcription of the authors' RAUQ estimator (mbzuai-nlp, rauq.py, default
# options: head="max", ablation=None, use_entropy=False), written with plain loops over their inputs: a list of
# per-sample attention maps (layers * heads, n, n) over the generated tokens and the greedy log-likelihoods.
def _authors_rauq(attention_all, log_likelihoods, *, n_layers, n_heads, alpha=0.2, layers=None,
                  token_aggregation="mean", aggregation="mean"):
    if layers is None:
        layers = list(range(n_layers // 3, int(np.ceil(n_layers / 3 * 2) + 1)))
    scores = []
    for maps, log_p in zip(attention_all, log_likelihoods, strict=True):
        maps = maps.reshape(n_layers, n_heads, maps.shape[-2], maps.shape[-1])
        previous = np.diagonal(maps, offset=-1, axis1=2, axis2=3)  # (layers, heads, n - 1): entry (j, j - 1)
        per_layer = []
        for layer in layers:
            with warnings.catch_warnings():  # a one-token output: the mean of nothing, head 0 (numpy's argmax)
                warnings.simplefilter("ignore", RuntimeWarning)
                head = previous[layer].mean(-1).argmax()
            confidences = [math.exp(log_p[0])]
            for j in range(1, len(log_p)):
                attn = previous[layer, head, j - 1]
                confidences.append(alpha * math.exp(log_p[j]) + (1 - alpha) * attn * confidences[-1])
            if token_aggregation == "mean":
                per_layer.append(1 - np.mean(confidences))
            elif token_aggregation == "min":
                per_layer.append(1 - np.min(confidences))
            else:
                per_layer.append(1 - (np.mean(confidences) + np.min(confidences)) / 2)
        scores.append(np.mean(per_layer) if aggregation == "mean" else np.max(per_layer))
    return np.array(scores)


def _synthetic(lengths, *, n_layers=9, n_heads=5, seed=0):
    """Rows with 24 candidates (the sampled token among them) and a fake pack of previous-token attentions."""
    rng = np.random.default_rng(seed)
    rows, pack = [], {}
    for index, n in enumerate(lengths):
        probs = np.sort(rng.dirichlet(np.ones(40), size=n)[:, :24], axis=1)[:, ::-1]
        ids = np.stack([rng.permutation(100)[:24] for _ in range(n)])
        chosen = ids[np.arange(n), rng.integers(0, 24, size=n)]
        gid = f"g{index}"
        rows.append({"generation_id": gid, "output_tokens": chosen.tolist(), "logits_token_ids": ids.tolist(),
                     "logits_values": probs.tolist()})
        pack[gid] = {"attention_to_previous": rng.random((n, n_layers, n_heads)).astype(np.float32)}
    return rows, pack


def _authors_inputs(rows, pack, n_layers, n_heads):
    """The pack's arrays laid out as the authors' inputs: attention maps over the generated tokens whose (j, j - 1)
    entries are row j of attention_to_previous, and the log-likelihoods of the sampled tokens."""
    maps, log_likelihoods = [], []
    for row in rows:
        attention = pack[row["generation_id"]]["attention_to_previous"]
        n = attention.shape[0]
        full = np.zeros((n_layers * n_heads, n, n))
        for j in range(1, n):
            full[:, j, j - 1] = attention[j].reshape(-1)
        maps.append(full)
        log_likelihoods.append([math.log(dict(zip(i, p, strict=True))[t]) for t, i, p in
                                zip(row["output_tokens"], row["logits_token_ids"], row["logits_values"],
                                    strict=True)])
    return maps, log_likelihoods


@pytest.mark.parametrize("n_layers", [9, 30, 32])
def test_rauq_equals_the_authors_estimator(n_layers):
    rows, pack = _synthetic([7, 1, 2, 15, 40], n_layers=n_layers)
    arrays = token_arrays(rows)
    maps, log_likelihoods = _authors_inputs(rows, pack, n_layers, 5)
    ours = [scores.mean() for scores in rauq_module.rauq(arrays, internals=pack)]
    np.testing.assert_allclose(ours, _authors_rauq(maps, log_likelihoods, n_layers=n_layers, n_heads=5), rtol=1e-9)
    # layer by layer (head selection and recurrence of each layer): 1 - min_t c_l(t)
    probabilities = [np.exp(ll) for ll in log_likelihoods]
    for layer in rauq_module.rauq_layers(n_layers):
        mine = [1 - rauq_module.rauq_confidences(p, pack[row["generation_id"]]["attention_to_previous"],
                                                 layers=np.array([layer]))[:, 0].min()
                for p, row in zip(probabilities, rows, strict=True)]
        theirs = _authors_rauq(maps, log_likelihoods, n_layers=n_layers, n_heads=5, layers=[layer],
                               token_aggregation="min")
        np.testing.assert_allclose(mine, theirs, rtol=1e-9)
    # another alpha
    ours = [scores.mean() for scores in rauq_module.rauq(arrays, internals=pack, alpha=0.6)]
    np.testing.assert_allclose(ours, _authors_rauq(maps, log_likelihoods, n_layers=n_layers, n_heads=5, alpha=0.6),
                               rtol=1e-9)


def test_layers_match_the_authors_selection():
    for n in (2, 3, 9, 16, 24, 30, 32, 40):
        expected = [layer for layer in range(n // 3, int(np.ceil(n / 3 * 2) + 1)) if layer < n]
        assert rauq_module.rauq_layers(n).tolist() == expected


def test_attention_previous_and_bounds():
    rows, pack = _synthetic([5, 9])
    arrays = token_arrays(rows)
    for scores in (rauq_module.rauq(arrays, internals=pack), rauq_module.attention_previous(arrays, internals=pack)):
        flat = np.concatenate(scores)
        assert flat.shape == (14,) and (flat >= 0).all() and (flat <= 1).all()
    # a pack row of another length names the sample
    bad = {**pack, "g1": {"attention_to_previous": pack["g1"]["attention_to_previous"][:3]}}
    with pytest.raises(ValueError, match="generation_id='g1'.*3 rows for 9 output tokens"):
        rauq_module.rauq(arrays, internals=bad)


def test_registered_as_needing_internals_and_not_in_the_all_group():
    assert resolve("rauq").needs == ("internals",) and resolve("rauq").display == "RAUQ"
    assert "rauq" not in signal_groups()["all"] and "rauq" not in signal_groups()["all-probability"]


def test_much_run_prints_a_rauq_row(tmp_path, capsys):
    """``much run --source sample --config en --internals PACK --signals rauq`` on a pack written by the builder's
    writers (random attention for every English sample row; the SmolLM2 pack is built by
    benchmarks/bench_internals.py)."""
    import much_dataset
    from much_metric.cli import main

    data = much_dataset.load("sample", config="en", split="test")
    write_random_pack(tmp_path, data)
    code = main(["run", "--source", "sample", "--config", "en", "--internals", str(tmp_path), "--signals",
                 "rauq,attention_previous", "--bootstrap", "0", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert any(line.lstrip("│| ").startswith("RAUQ") for line in out.splitlines()), out
    assert "Attention to previous" in out
    # without a pack: a clear error naming what is missing
    assert main(["run", "--source", "sample", "--config", "en", "--signals", "rauq", "--bootstrap", "0",
                 "--no-progress"]) == 2
    assert "internals pack" in capsys.readouterr().err
