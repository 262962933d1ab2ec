"""NLI label mapping from id2label and the batched, de-duplicated NLI runner (vs one model call per pair)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_metric.baselines import NliScorer, nli_label_indices
from much_metric.baselines.nli import nli_signal_suffix, resolve_nli
from tests.much_metric._baselines_helpers import MUSHROOM, one_torch_thread, tiny_nli_parts


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


@pytest.mark.parametrize(
    ("id2label", "expected"),
    [
        ({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, (2, 0, 1, 3)),  # microsoft/deberta-*-mnli
        ({0: "entailment", 1: "neutral", 2: "contradiction"}, (0, 2, 1, 3)),  # XNLI models
        ({0: "entailment", 1: "not_entailment"}, (0, 1, None, 2)),  # MoritzLaurer ... -binary (hub labels)
        ({"0": "Entailment", "1": "Non-Entailment"}, (0, 1, None, 2)),
    ],
)
def test_label_indices(id2label, expected):
    labels = nli_label_indices(id2label)
    assert (labels.entailment, labels.contradiction, labels.neutral, labels.n_labels) == expected


@pytest.mark.parametrize(
    ("id2label", "message"),
    [
        ({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, "cannot infer"),
        ({0: "neutral", 1: "contradiction"}, "no entailment class"),
        ({0: "entailment", 1: "neutral"}, "no contradiction class"),
        ({0: "entailment", 1: "entailed", 2: "contradiction"}, "two labels map to entailment"),
        ({1: "entailment", 2: "contradiction"}, "keys must be 0..n-1"),
        ({}, "non-empty"),
    ],
)
def test_label_indices_errors(id2label, message):
    with pytest.raises(ValueError, match=message):
        nli_label_indices(id2label)


def test_signal_suffixes_and_resolve():
    assert nli_signal_suffix(None) == nli_signal_suffix("microsoft/deberta-large-mnli") == ""
    assert nli_signal_suffix("microsoft/deberta-base-mnli") == "_M"
    assert nli_signal_suffix("/models/My_XNLI.model/") == "_my-xnli-model"
    with pytest.raises(TypeError, match="predict_proba"):
        resolve_nli(object())


def _pairs(n: int) -> tuple[list[str], list[str]]:
    lines = (MUSHROOM / "mushroom.en-tst.v1.extra.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["model_output_text"][:120] for line in lines[: n + 1]]
    premises = texts[:n]
    hypotheses = [t[: len(t) // 2] for t in texts[1:]]
    # Duplicates, as a split produces them (repeated answers; candidates decoding to the same text).
    return premises + premises[:3] + [premises[0]], hypotheses + hypotheses[:3] + [premises[0]]


def test_batched_deduplicated_equals_one_model_call_per_pair():
    import torch

    model, tokenizer = tiny_nli_parts()
    premises, hypotheses = _pairs(10)
    scorer = NliScorer(model, tokenizer, batch_size=4, progress=False)
    ours = scorer.predict_proba(premises, hypotheses)
    assert ours.shape == (len(premises), 3)
    with torch.inference_mode():
        direct = np.stack([
            torch.softmax(model(**tokenizer(p, h, return_tensors="pt")).logits[0], -1).numpy()
            for p, h in zip(premises, hypotheses, strict=True)
        ])
    np.testing.assert_allclose(ours, direct, atol=1e-5)
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, atol=1e-6)
    # Duplicated pairs get identical rows (they were computed once).
    np.testing.assert_array_equal(ours[10:13], ours[:3])
    # The argmax decisions (what CCP uses) are not all the same class: the test can tell labels apart.
    assert len(set(ours.argmax(axis=1).tolist())) > 1


def test_options_and_left_padding_do_not_change_results():
    model, tokenizer = tiny_nli_parts()
    premises, hypotheses = _pairs(8)
    reference = NliScorer(model, tokenizer, batch_size=1, deduplicate=False, sort_by_length=False,
                          progress=False).predict_proba(premises, hypotheses)
    for options in ({"batch_size": 64}, {"batch_size": 3, "sort_by_length": False}, {"deduplicate": False}):
        got = NliScorer(model, tokenizer, progress=False, **options).predict_proba(premises, hypotheses)
        np.testing.assert_allclose(got, reference, atol=1e-5)
    left = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer, pad_token=tokenizer.pad_token,
                               padding_side="left")
    got = NliScorer(model, left, batch_size=5, progress=False).predict_proba(premises, hypotheses)
    assert got.shape == reference.shape
    assert np.isfinite(got).all()


def test_scorer_errors_and_empty_input():
    model, tokenizer = tiny_nli_parts()
    scorer = NliScorer(model, tokenizer, progress=False)
    assert scorer.predict_proba([], []).shape == (0, 3)
    with pytest.raises(ValueError, match="2 premises but 1 hypotheses"):
        scorer.predict_proba(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="batch_size"):
        NliScorer(model, tokenizer, batch_size=0)
    no_pad = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer)
    with pytest.raises(ValueError, match="no pad token"):
        NliScorer(model, no_pad)

