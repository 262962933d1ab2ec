"""Issue #44: rows checked against the sampler they claim (builder.generation.rows.check_sampled, run by check_row for
every engine): differential against transformers' own top-k / top-p warpers (HF's order, MUCH's reference sampler)
on random distributions -- every token the warpers keep passes, every stored token they drop is refused -- and the
end of a row against its finish reason."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from builder.generation.rows import MASS_SLACK, TIE_SLACK, RowLimits, candidates_row, check_row
from much_dataset import schema
from much_dataset.validation import InvalidSampleError

VOCAB, EOS = 300, 7


def _row(tokens, positions, *, finished=True):
    ids, probs = [], []
    for token, lp in zip(tokens, positions, strict=True):
        row_ids, row_probs = candidates_row(token, lp[token], [(i, lp[i]) for i in range(VOCAB)])
        ids.append(row_ids)
        probs.append(row_probs)
    return {schema.GENERATION_ID: "g", schema.OUTPUT_TOKENS: list(tokens), schema.LOGITS_TOKEN_IDS: ids,
            schema.LOGITS_VALUES: probs, "finished": finished}


def _kept_by_hf(lp, top_k, top_p):
    """The token ids transformers' TopK then TopP warpers keep (the reference's sampler)."""
    import torch
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    scores = torch.tensor(lp, dtype=torch.float64)[None]
    if top_k > 0:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return set(np.flatnonzero(np.isfinite(scores[0].numpy())).tolist())


def _clearly_dropped(lp, token, top_k, top_p) -> bool:
    """Dropped by more than the checks' rounding slack (a near-tie at the boundary may go either way), and decidably
    so from the stored 24: a top-k above 24 leaves the top-k mass known only up to the 24th probability per rank."""
    probs = np.sort(np.exp(lp))[::-1]
    rank = int(np.flatnonzero(probs == np.exp(lp[token]))[0])
    if top_k and rank >= top_k and probs[rank] < probs[top_k - 1] * (1 - TIE_SLACK):
        return True
    mass = probs[:top_k].sum() if top_k else 1.0
    if top_k > schema.TOP_K:
        mass = min(1.0, probs[:24].sum() + (top_k - 24) * probs[23])
    return top_p < 1 and probs[:rank].sum() > top_p * mass + MASS_SLACK


def _position(rng, peak):
    logits = rng.normal(0, peak, VOCAB)
    logits[EOS] = -30  # EOS only where the test puts it
    return logits - np.logaddexp.reduce(logits)


@pytest.mark.parametrize("top_k, top_p", [(20, 0.9), (0, 0.9), (20, 1.0), (50, 0.95), (5, 0.5), (0, 0.3)])
def test_every_token_the_reference_sampler_keeps_passes_and_every_stored_one_it_drops_is_refused(top_k, top_p):
    rng = np.random.default_rng(top_k * 100 + int(top_p * 10))
    limits = RowLimits(vocab_size=VOCAB, max_new_tokens=10, top_k=top_k, top_p=top_p, eos_ids=frozenset({EOS}))
    end = np.full(VOCAB, -30.0)
    end[EOS] = 0.0
    end -= np.logaddexp.reduce(end)
    checked = refused = 0
    for _ in range(20):
        lp = _position(rng, peak=rng.choice([0.5, 2.0, 4.0]))
        kept = _kept_by_hf(lp, top_k, top_p)
        order = [int(i) for i in np.argsort(-lp, kind="stable")]
        for token in order[:30]:
            row = _row([token, EOS], [lp, end])
            if token in kept:
                check_row(row, limits)  # never a false refusal
                checked += 1
            elif (order.index(token) < schema.TOP_K or (top_k and top_k <= schema.TOP_K)) and \
                    _clearly_dropped(lp, token, top_k, top_p):
                with pytest.raises(InvalidSampleError, match="not what the sampler the row claims"):
                    check_row(row, limits)  # decidable from the stored 24: refused
                refused += 1
    assert checked > 20 and (refused > 20 or (top_k == 0 and top_p == 1.0))


def test_greedy_rows_take_the_most_probable_token():
    rng = np.random.default_rng(1)
    lp = _position(rng, 3.0)
    end = np.where(np.arange(VOCAB) == EOS, 0.0, -30.0)
    end -= np.logaddexp.reduce(end)
    limits = RowLimits(vocab_size=VOCAB, max_new_tokens=5, greedy=True, eos_ids=frozenset({EOS}))
    order = np.argsort(-lp)
    check_row(_row([int(order[0]), EOS], [lp, end]), limits)
    with pytest.raises(InvalidSampleError, match="not the most probable"):
        check_row(_row([int(order[1]), EOS], [lp, end]), limits)


@pytest.mark.parametrize("case, finished, match", [
    ("no-eos", True, "is not an EOS or special token"),
    ("eos-middle", True, "stop token 7 before the last token"),
    ("eos-unfinished", False, "is EOS, but the row is not finished"),
    ("short-unfinished", False, "fewer than max_new_tokens=5"),
    ("repeated-stop", True, "stop token 11 before the last token"),
])
def test_the_end_of_a_row_agrees_with_how_it_finished(case, finished, match):
    rng = np.random.default_rng(2)
    positions = [_position(rng, 1.0) for _ in range(5)]
    for lp in positions:
        lp[EOS] = lp.max()  # EOS allowed anywhere
        lp[11] = lp.max()
        lp -= np.logaddexp.reduce(lp)
    top: list[int] = []
    for lp in positions:  # a likely word, each position its own
        top.append(next(int(i) for i in np.argsort(-lp)[2:] if i not in (EOS, 11, *top)))
    tokens = {"no-eos": top[:3], "eos-middle": [top[0], EOS, top[2], EOS], "eos-unfinished": [top[0], EOS],
              "short-unfinished": top[:3], "repeated-stop": [11, top[1], 11]}[case]
    special = frozenset({EOS, 11})
    limits = RowLimits(vocab_size=VOCAB, max_new_tokens=5, eos_ids=frozenset({EOS}), special_ids=special)
    if case == "repeated-stop":  # the stop token is not the tokenizer's EOS (unknown): the last one stops, once
        limits = RowLimits(vocab_size=VOCAB, max_new_tokens=5, special_ids=special)
    with pytest.raises(InvalidSampleError, match=match):
        check_row(_row(tokens, positions[: len(tokens)], finished=finished), limits)
    check_row(_row([*top[:2], EOS], positions[:3]), limits)  # the same positions, ended properly
    check_row(_row(top[:5], positions, finished=False), limits)  # cut at max_new_tokens


def test_a_larger_top_k_is_checked_where_the_stored_candidates_decide():
    """top_k 50 > 24: a token appended from below the 24 is not judged by rank (it may be within 50), but the
    nucleus still refuses it when even the 24 stored above it hold more than top_p of the largest top-50 mass."""
    rng = np.random.default_rng(3)
    flat = _position(rng, 0.1)  # a flat distribution: the top 24 hold little mass
    peaked = _position(rng, 6.0)  # a peaked one: the top 24 hold nearly everything
    end = np.where(np.arange(VOCAB) == EOS, 0.0, -30.0)
    end -= np.logaddexp.reduce(end)
    limits = RowLimits(vocab_size=VOCAB, max_new_tokens=5, top_k=50, top_p=0.9, eos_ids=frozenset({EOS}))
    for lp, ok in ((flat, True), (peaked, False)):
        token = int(np.argsort(-lp)[30])
        row = _row([token, EOS], [lp, end])
        assert len(row[schema.LOGITS_TOKEN_IDS][0]) == 25
        if ok:
            check_row(row, limits)
        else:
            with pytest.raises(InvalidSampleError, match="nucleus"):
                check_row(row, limits)
    assert math.isclose(sum(np.exp(flat)), 1.0)


def test_limits_travel_to_another_process_as_json_and_back():
    """The Ray executor's actors send their engine's limits back as JSON; the stop-token sets survive the trip (a
    frozenset is no JSON type: asdict + json.dumps raised TypeError in every actor)."""
    limits = RowLimits(vocab_size=VOCAB, max_new_tokens=7, top_k=20, top_p=0.9, eos_ids=frozenset({EOS, 5}),
                       special_ids=frozenset({EOS, 5, 9}))
    text = limits.to_json()
    assert json.loads(text)["eos_ids"] == sorted({EOS, 5})
    assert RowLimits.from_json(text) == limits
