"""Property (#12): valid MUCH inputs never raise; the same inputs with one defect injected into one sample raise a
ValueError that names that sample."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from much_metric.scoring import MuchMetricWarning, score

DEFECTS = ("shift", "extra_score", "missing_score", "overlap", "gap", "out_of_order", "float_index", "bad_label")


@st.composite
def much_inputs(draw):
    """Samples whose chunks are consecutive, in order and cover every token once; labels -1/1 (EOS claim 1)."""
    n_samples = draw(st.integers(1, 6))
    scores, chunks, labels = [], [], []
    for _ in range(n_samples):
        lengths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
        lengths.append(1)  # the EOS claim
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        chunks.append([list(range(int(a), int(b))) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
        labels.append([*draw(st.lists(st.sampled_from([-1, 1]), min_size=len(lengths) - 1,
                                      max_size=len(lengths) - 1)), 1])
        scores.append(draw(st.lists(st.floats(0, 1), min_size=int(bounds[-1]), max_size=int(bounds[-1]))))
    as_numpy = draw(st.booleans())
    if as_numpy:
        scores = [np.asarray(s) for s in scores]
    return scores, chunks, labels


def _inject(defect: str, data, scores, chunks, labels) -> int:
    """Damage one random sample in place; return its index."""
    sample = data.draw(st.integers(0, len(scores) - 1), label="sample")
    s, c, lab = list(scores[sample]), chunks[sample], labels[sample]
    n = len(s)
    if defect == "shift":  # a BOS or prompt token's score kept in front
        s.insert(0, 0.5)
    elif defect == "extra_score":
        s.append(0.5)
    elif defect == "missing_score":
        s.pop(data.draw(st.integers(0, n - 1), label="missing"))
    elif defect == "overlap":
        k = data.draw(st.integers(0, len(c) - 1), label="chunk")
        if k:  # the chunk also takes its predecessor's last token (still a run of consecutive indices)
            c[k] = [c[k][0] - 1, *c[k]]
        else:  # a second copy of the first chunk
            c.insert(1, list(c[0]))
            lab.insert(1, 1)
    elif defect == "gap":
        token = data.draw(st.integers(0, n - 1), label="token")
        for k, chunk in enumerate(c):
            if token in chunk:
                chunk.remove(token)
                if not chunk:
                    del c[k], lab[k]
                break
    elif defect == "out_of_order":
        if len(c) == 1:  # nothing to swap: the single chunk's tokens in reverse
            c[0] = c[0][::-1] if len(c[0]) > 1 else c[0]
            s.append(0.5)  # (a one-token sample: fall back to a misaligned score)
        else:
            k = data.draw(st.integers(0, len(c) - 2), label="swap")
            c[k], c[k + 1] = c[k + 1], c[k]
            lab[k], lab[k + 1] = lab[k + 1], lab[k]
    elif defect == "float_index":
        k = data.draw(st.integers(0, len(c) - 1), label="chunk")
        i = data.draw(st.integers(0, len(c[k]) - 1), label="index")
        c[k][i] = c[k][i] + data.draw(st.sampled_from([0.1, 0.5, 0.9, -0.5]), label="fraction")
    elif defect == "bad_label":
        k = data.draw(st.integers(0, len(lab) - 1), label="chunk")
        lab[k] = data.draw(st.sampled_from([1.5, -0.5, 0, 2, -1.000001]), label="label")
    scores[sample] = np.asarray(s) if isinstance(scores[sample], np.ndarray) else s
    return sample


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=much_inputs(), defect=st.sampled_from(DEFECTS), data=st.data())
def test_one_defect_in_one_sample_raises_naming_it(inputs, defect, data):
    scores, chunks, labels = inputs
    ids = [f"gen-{i}" for i in range(len(scores))]
    sample = _inject(defect, data, scores, chunks, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MuchMetricWarning)
        with pytest.raises(ValueError) as info:
            score(scores, chunks, labels, generation_ids=ids)
    assert f"#{sample} (generation_id='gen-{sample}')" in str(info.value), (defect, str(info.value))


@settings(max_examples=300, deadline=None)
@given(inputs=much_inputs(), aggregator=st.sampled_from(["product", "mean", "max", "geometric"]))
def test_valid_inputs_never_raise(inputs, aggregator):
    scores, chunks, labels = inputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MuchMetricWarning)  # a single class among the claims: nan metrics
        result = score(scores, chunks, labels, aggregation=aggregator,
                       generation_ids=[f"g{i}" for i in range(len(scores))])
    assert result.n_samples == len(scores)
    assert result.n_claims == sum(len(c) - 1 for c in chunks)
    assert result.n_hallucinated == sum(lab[:-1].count(-1) for lab in labels)
