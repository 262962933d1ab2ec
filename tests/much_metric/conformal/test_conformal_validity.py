"""Guarantees measured on synthetic exchangeable answers; splits; claims kept; the metric's claim scores reused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from much_metric import aggregate_claims
from much_metric.conformal import (
    ClaimSet,
    Splits,
    calibrate,
    claims_from_claim_scores,
    claims_from_token_scores,
    claims_kept,
    filter_claims,
    load_calibration,
    split_masks,
    violation_rates,
)
from much_metric.scoring import Aggregation
from tests.much_metric.conformal._synthetic import synthetic_claims

ALPHAS = (0.05, 0.1, 0.2)


@pytest.mark.parametrize("guarantee", ["answer", "claim"])
@pytest.mark.parametrize("by", [None, "lang"])
def test_realised_violation_rate_is_within_sampling_error_of_alpha(guarantee, by):
    claims = synthetic_claims(400 if by else 240, seed=11)
    cells = violation_rates(claims, guarantee=guarantee, alphas=ALPHAS, by=by,
                            splits=Splits(n_splits=150, random_state=1))
    assert {c.group for c in cells} == {"", "en", "fr", "es", "de"}
    level = 1 - 0.05 / len(cells)  # Bonferroni: one false alarm in 20 runs of the whole check
    for cell in cells:
        # A pooled calibration promises nothing per language; a per-language FDR promises nothing pooled (a ratio's
        # expectation does not mix over groups: languages that keep nothing leave the pooled FDP to the others).
        if (cell.group == "") == (by is None) or (cell.group == "" and guarantee == "answer"):
            assert cell.trials >= 150 if cell.group == "" else cell.trials > 0
            assert not cell.exceeds(level), (cell, cell.interval)


def test_the_validity_check_fails_a_filter_that_breaks_its_guarantee():
    """The same measurement flags a filter whose threshold is too permissive (keeps claims up to a higher
    uncertainty than calibrated): the check has the power to fail."""
    claims = synthetic_claims(240, seed=12)
    masks = split_masks(claims, Splits(n_splits=150, random_state=2))
    events = 0
    for in_calibration in masks:
        fitted = calibrate(claims.subset(in_calibration), alpha=0.1)
        loose = dataclasses.replace(fitted, groups={k: dataclasses.replace(g, threshold=g.threshold + 1.0)
                                                    for k, g in fitted.groups.items()})
        test = claims.subset(~in_calibration)
        kept = loose.apply(test).kept
        answers = np.unique(test.answer[kept & test.hallucinated])
        events += len(answers) / len(np.unique(test.answer)) > 0.1
    assert events > 100  # most splits violate at 10 %


def test_splits_never_cut_an_answer_and_article_splits_keep_articles_together():
    claims = synthetic_claims(100, seed=13)
    for unit, column in (("answer", claims.answer), ("article", claims.groups["article"])):
        masks = split_masks(claims, Splits(n_splits=20, unit=unit, random_state=3))
        for mask in masks:
            assert not np.intersect1d(column[mask], column[~mask]).size
        assert len({m.tobytes() for m in masks}) == 20
        assert np.array_equal(masks, split_masks(claims, Splits(n_splits=20, unit=unit, random_state=3)))


def test_claims_kept_is_paired_and_a_better_detector_keeps_more():
    good = synthetic_claims(240, seed=14, shift=3.0)
    noise = np.random.default_rng(0).normal(size=len(good))
    weak = dataclasses.replace(good, claim_scores=good.claim_scores * 0.0 + noise)
    result = claims_kept({"good": good, "weak": weak}, alphas=ALPHAS, splits=Splits(n_splits=30, random_state=4))
    for alpha in ALPHAS:
        summary = result.summary("good", alpha)
        low, high = summary["kept_interval"]
        assert 0 <= low <= summary["kept"] <= high <= 1
        assert summary["correct_kept"] >= summary["kept"]  # a filter drops hallucinated claims first
        assert result.paired("good", "weak", alpha)["difference"] > 0
    assert result.summary("good", 0.2)["kept"] >= result.summary("good", 0.05)["kept"]
    with pytest.raises(ValueError, match="same claims"):
        claims_kept({"good": good, "short": good.subset(np.arange(len(good)) > 5)}, splits=Splits(n_splits=2))


def test_claims_come_from_the_metrics_aggregation_stopwords_included():
    scores = [[0.5, 0.2, 0.5, 0.0], [0.9, 0.1, 0.3]]
    chunks = [[[0], [1, 2], [3]], [[0, 1], [2]]]
    mask = [[False, False, True, False], [False, True, False]]
    data = {"generation_id": ["a", "b"], "token_chunks": chunks, "stopword_mask": mask, "labels": [[1, -1, 1],
            [-1, 1]], "lang": ["en", "fr"]}
    aggregation = Aggregation(aggregator="mean", stopword_handling="exclude")
    claims = claims_from_token_scores(scores, data, aggregation=aggregation, groups=["lang"])
    expected = np.concatenate(aggregate_claims(scores, chunks, mask, aggregation=aggregation))
    np.testing.assert_array_equal(claims.claim_scores, expected)
    assert claims.hallucinated.tolist() == [False, True, True]
    assert claims.answer.tolist() == ["a", "a", "b"] and claims.groups["lang"].tolist() == ["en", "en", "fr"]
    per_claim = claims_from_claim_scores([[0.1, 0.7, 0.0], [0.4, 0.0]], data)
    assert per_claim.claim_scores.tolist() == [0.1, 0.7, 0.4]  # the EOS claim dropped, as the metric does
    with pytest.raises(ValueError, match="generation_id 'b': claim_scores has 1 values but token_chunks has 2"):
        claims_from_claim_scores([[0.1, 0.7, 0.0], [0.4]], data)
    unlabelled = claims_from_token_scores(scores, {k: v for k, v in data.items() if k != "labels"})
    assert unlabelled.hallucinated is None and len(unlabelled) == 3
    with pytest.raises(ValueError, match="lack the column 'token_chunks'"):
        claims_from_claim_scores([[0.1]], {"generation_id": ["a"]})


def test_a_non_finite_claim_score_is_refused_naming_its_answer():
    with pytest.raises(ValueError, match="generation_id 'b'.*not finite"):
        ClaimSet(claim_scores=np.array([0.1, np.nan]), answer=np.array(["a", "b"], dtype=object))


@pytest.mark.parametrize("guarantee", ["answer", "claim"])
def test_threshold_file_round_trips_and_filter_claims_agrees_with_apply(tmp_path, guarantee):
    claims = synthetic_claims(300, seed=15, shift=2.0)
    fitted = calibrate(claims, alpha=0.2, guarantee=guarantee, by="lang").for_signal(
        "token_entropy_24", {"aggregator": "product"})
    path = fitted.save(tmp_path / "thresholds.json")
    loaded = load_calibration(path)
    assert loaded.to_dict() == fitted.to_dict()
    assert len(loaded.calibration_hash) == 64 and len(loaded.calibration_rows) == 300
    new = synthetic_claims(50, seed=16, shift=2.0, prefix="new")
    for answer in np.unique(new.answer):
        one = new.subset(new.answer == answer)
        expected = np.flatnonzero(fitted.apply(one).kept).tolist()
        assert filter_claims(path, one.claim_scores, group=one.groups["lang"][0]) == expected
    with pytest.raises(ValueError, match="'it' is outside the guarantee"):
        filter_claims(loaded, [0.1], group="it")
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json: not readable"):
        load_calibration(tmp_path / "bad.json")


def test_calibration_hash_depends_on_the_rows_and_their_claims():
    claims = synthetic_claims(100, seed=17)
    base = calibrate(claims, alpha=0.2).calibration_hash
    assert calibrate(claims, alpha=0.1).calibration_hash == base
    moved = dataclasses.replace(claims, claim_scores=claims.claim_scores + 1e-9)
    assert calibrate(moved, alpha=0.2).calibration_hash != base
    shuffled = claims.subset(np.random.default_rng(0).permutation(len(claims)))
    assert calibrate(shuffled, alpha=0.2).calibration_hash == base
