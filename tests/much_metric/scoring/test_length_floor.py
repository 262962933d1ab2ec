"""The length-only floor: each claim's non-stopword token count, and why a per-token random signal lands near it."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.scoring import claim_layout, length_scores


def _naive_lengths(chunks, masks, drop_last_chunk=True):
    """Straightforward loop: per evaluated claim, how many of its tokens are not stopwords."""
    out = []
    for sample_chunks, mask in zip(chunks, masks, strict=True):
        kept = sample_chunks[:-1] if drop_last_chunk else sample_chunks
        out += [float(sum(1 for t in chunk if mask is None or not mask[t])) for chunk in kept]
    return out


@pytest.mark.parametrize("drop_last_chunk", [True, False])
@pytest.mark.parametrize("with_mask", [True, False])
def test_length_scores_match_a_loop(drop_last_chunk, with_mask):
    rng = np.random.default_rng(3)
    chunks, masks, n_tokens = [], [], []
    for _ in range(30):
        sizes = rng.integers(1, 6, size=rng.integers(1, 6))
        edges = np.concatenate([[0], np.cumsum(sizes)])
        chunks.append([list(range(a, b)) for a, b in zip(edges[:-1], edges[1:], strict=True)])
        n_tokens.append(int(edges[-1]))
        masks.append((rng.random(int(edges[-1])) < 0.3).tolist())
    layout = claim_layout(chunks, n_tokens, stopword_mask=masks if with_mask else None,
                          drop_last_chunk=drop_last_chunk)
    expected = _naive_lengths(chunks, masks if with_mask else [None] * len(chunks), drop_last_chunk)
    assert length_scores(layout).tolist() == expected


@pytest.mark.slow
def test_per_token_random_signal_lands_near_the_length_floor_on_the_sample():
    """Random token scores, product aggregator: above the random floor, near the length floor (claim length)."""
    import much_dataset
    from much_metric.report import EvaluationOptions, evaluate_signals

    data = much_dataset.load("sample", split="test")
    rng = np.random.default_rng(0)
    noise = {g: rng.random(len(t)).tolist() for g, t in zip(data["generation_id"], data["output_tokens"],
                                                                strict=True)}
    table = evaluate_signals(data, {"noise": noise}, evaluation=EvaluationOptions(bootstrap=None))
    roc = {r.signal_name: r.score.roc_auc for r in [*table.results, *table.floors]}
    assert roc["floor: length"] > roc["floor: random"] + 0.03
    assert abs(roc["noise"] - roc["floor: length"]) < abs(roc["noise"] - roc["floor: random"])
