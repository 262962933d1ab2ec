"""evaluate_signals extensions: floors, ground-truth choice, claim-level signals, coverage; leaderboard and
calibration of an EvaluationTable -- each against a direct computation (scikit-learn / the scoring functions)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.report._calibrate import calibrate_table, fit_rows_by_fraction
from much_metric.report._rank import rank_methods
from much_metric.scoring import Aggregation, Bootstrap, aggregate_claims, ece, fit_calibrator, rank_claim_scores, score


@pytest.fixture(scope="module")
def rows():
    rows = make_rows(60, seed=7)
    for index, row in enumerate(rows):
        if index % 3 == 0:  # one annotator's labels differ from the GPT labels on a third of the samples
            row[schema.HUMAN_LABELS_0] = [-v for v in row[schema.LABELS][:-1]] + [1]
            row[schema.HUMAN_LABELS_1] = row[schema.HUMAN_LABELS_0] if index % 2 else list(row[schema.LABELS])
        else:
            row[schema.HUMAN_LABELS_0] = row[schema.HUMAN_LABELS_1] = [0]
    return rows


def _signals(rows):
    return {
        "max_likelihood": {r[schema.GENERATION_ID]: 1 - np.asarray(r[schema.LOGITS_VALUES])[:, 0] for r in rows},
        "noise": {r[schema.GENERATION_ID]: np.random.default_rng(i).random(len(r[schema.OUTPUT_TOKENS]))
                  for i, r in enumerate(rows)},
    }


def _claims(rows, labels_column=schema.LABELS):
    y = np.concatenate([np.asarray(r[labels_column][:-1]) == schema.HALLUCINATED for r in rows])
    return y


def test_floors_are_the_seeded_random_and_constant_scores(rows):
    table = evaluate_signals(rows, _signals(rows), evaluation=EvaluationOptions(bootstrap=None))
    random_row, constant_row, length_row = table.floors
    y = _claims(rows)
    expected_scores = np.random.default_rng(0).random(len(y))
    np.testing.assert_array_equal(random_row.claim_scores, expected_scores)
    assert random_row.score.roc_auc == pytest.approx(roc_auc_score(y, expected_scores), abs=1e-12)
    assert constant_row.score.roc_auc == 0.5
    assert constant_row.score.average_precision == pytest.approx(y.mean())
    assert constant_row.score.pr_auc == pytest.approx((1 + y.mean()) / 2)
    assert constant_row.score.prr == pytest.approx(0.0, abs=1e-12)
    lengths = length_row.claim_scores  # non-stopword token counts (tests/much_metric/scoring/test_length_floor.py)
    assert np.all(lengths == np.round(lengths)) and lengths.min() >= 0 and len(lengths) == len(y)
    assert length_row.score.roc_auc == pytest.approx(roc_auc_score(y, lengths), abs=1e-12)
    assert evaluate_signals(rows, _signals(rows),
                            evaluation=EvaluationOptions(bootstrap=None, floors=False)).floors == []


def test_random_state_of_the_floor_is_honoured_with_and_without_bootstrap(rows):
    """--random-state must reach the random floor even with --bootstrap 0 (no silently ignored option)."""
    y = _claims(rows)
    seeded = np.random.default_rng(7).random(len(y))
    no_bootstrap = evaluate_signals(rows, _signals(rows),
                                    evaluation=EvaluationOptions(bootstrap=None, random_state=7)).floors[0]
    np.testing.assert_array_equal(no_bootstrap.claim_scores, seeded)
    with_bootstrap = evaluate_signals(rows, _signals(rows),
                                      evaluation=EvaluationOptions(bootstrap=Bootstrap(n_resamples=40, random_state=7)))
    from_bootstrap = with_bootstrap.floors[0]
    np.testing.assert_array_equal(from_bootstrap.claim_scores, seeded)


def test_human_labels_exclude_the_sentinel_and_are_counted(rows):
    table = evaluate_signals(rows, _signals(rows),
                             evaluation=EvaluationOptions(bootstrap=None, labels=schema.HUMAN_LABELS_0, floors=False))
    labelled = [r for r in rows if r[schema.HUMAN_LABELS_0] != [0]]
    assert table.excluded == len(rows) - len(labelled) == 40
    assert table.n_dataset_samples == 20
    result = next(r for r in table.results if r.signal_name == "max_likelihood")
    direct = score([1 - np.asarray(r[schema.LOGITS_VALUES])[:, 0] for r in labelled],
                   [r[schema.TOKEN_CHUNKS] for r in labelled], [r[schema.HUMAN_LABELS_0] for r in labelled],
                   [r[schema.STOPWORD_MASK] for r in labelled])
    assert result.score.roc_auc == pytest.approx(direct.roc_auc, abs=1e-12)
    assert result.score.n_claims == direct.n_claims


def test_human_agreed_keeps_only_identical_annotations(rows):
    table = evaluate_signals(rows, _signals(rows),
                             evaluation=EvaluationOptions(bootstrap=None, labels="human-agreed", floors=False))
    agreed = [r for r in rows if r[schema.HUMAN_LABELS_0] != [0]
              and r[schema.HUMAN_LABELS_0] == r[schema.HUMAN_LABELS_1]]
    assert table.n_dataset_samples == len(agreed) == 10 and table.excluded == 50
    np.testing.assert_array_equal(table.results[0].hallucinated, _claims(agreed, schema.HUMAN_LABELS_0))
    with pytest.raises(ValueError, match="labels must be one of"):
        evaluate_signals(rows, _signals(rows), evaluation=EvaluationOptions(labels="gpt"))
    no_human = [{**r, schema.HUMAN_LABELS_0: [0]} for r in rows]
    with pytest.raises(ValueError, match="no sample of the dataset has ground truth"):
        evaluate_signals(no_human, _signals(rows), evaluation=EvaluationOptions(labels=schema.HUMAN_LABELS_0))


def test_claim_level_signal_equals_the_aggregated_token_signal(rows):
    token = _signals(rows)["max_likelihood"]
    ids = [r[schema.GENERATION_ID] for r in rows]
    claims = aggregate_claims([token[g] for g in ids], [r[schema.TOKEN_CHUNKS] for r in rows],
                              [r[schema.STOPWORD_MASK] for r in rows], aggregation=Aggregation(drop_last_chunk=False))
    signals = {"max_likelihood": token, "ml@claim": dict(zip(ids, claims, strict=True))}
    table = evaluate_signals(rows, signals,
                             evaluation=EvaluationOptions(bootstrap=Bootstrap(n_resamples=40), floors=False))
    by_name = {r.signal_name: r for r in table.results}
    assert by_name["ml@claim"].level == "claim" and by_name["ml@claim"].aggregator is None
    for key in ("roc_auc", "pr_auc", "prr", "prr_50"):
        assert by_name["ml@claim"].score.metrics[key] == pytest.approx(
            by_name["max_likelihood"].score.metrics[key], abs=1e-12)
    assert by_name["ml@claim"].score.intervals == by_name["max_likelihood"].score.intervals
    bad = {"x@claim": {ids[0]: [0.5]}}
    with pytest.raises(ValueError, match=f"generation_id={ids[0]!r}.*chunks"):
        evaluate_signals(rows, bad, evaluation=EvaluationOptions(min_coverage=0))


def test_coverage_is_reported_and_enforced(rows):
    signals = _signals(rows)
    del signals["noise"][rows[0][schema.GENERATION_ID]]
    with pytest.warns(UserWarning, match="1 of 60 samples"):
        table = evaluate_signals(rows, signals, evaluation=EvaluationOptions(bootstrap=None))
    assert table.coverage == {"max_likelihood": 1.0, "noise": pytest.approx(59 / 60)}
    assert table.results[1].coverage == pytest.approx(59 / 60)
    with pytest.raises(ValueError, match="below min_coverage=99%"):
        evaluate_signals(rows, signals, evaluation=EvaluationOptions(bootstrap=None, min_coverage=0.99))


def test_rank_methods_matches_leaderboard_and_per_language_values(rows):
    table = evaluate_signals(rows, _signals(rows),
                             evaluation=EvaluationOptions(aggregation=("product", "max"), bootstrap=None))
    board = rank_methods(table, "roc_auc", bootstrap=Bootstrap(n_resamples=200, random_state=3),
                         timings={"noise": {"seconds": 2.0}}, generation_seconds=100.0)
    scores = {f"{r.signal_name} ({r.aggregator})": r.claim_scores for r in table.results}
    y = table.results[0].hallucinated
    direct = rank_claim_scores(scores, y, table.results[0].claim_rows, len(rows), metric="roc_auc",
                               bootstrap=Bootstrap(n_resamples=200, random_state=3))
    assert [r.method for r in board.rows] == [r["method"] for r in direct["rows"]]
    assert [r.rank for r in board.rows] == [r["rank"] + 1 for r in direct["rows"]]
    np.testing.assert_allclose(board.p_values, direct["p_values"])
    langs = np.array([r[schema.LANG] for r in rows])[table.results[0].claim_rows]
    for row in board.rows:
        per = {lang: roc_auc_score(y[langs == lang], scores[row.method][langs == lang]) for lang in set(langs)}
        assert row.lang_gap == pytest.approx(max(per.values()) - min(per.values()), abs=1e-12)
        if row.method.startswith("noise"):
            assert row.relative_runtime == pytest.approx(0.02)
        else:
            assert row.seconds is None
    assert set(board.floors) == {"floor: random", "floor: constant", "floor: length"}
    with pytest.raises(ValueError, match="unknown --rank metric 'accuracy'"):
        rank_methods(table, "accuracy")


def test_calibration_on_a_seeded_half_equals_a_direct_fit(rows):
    table = evaluate_signals(rows, _signals(rows), evaluation=EvaluationOptions(bootstrap=None))
    (first, second) = calibrate_table(table, fit_fraction=0.5, bootstrap=Bootstrap(n_resamples=50, random_state=1))
    result = table.results[0]
    fit_rows = fit_rows_by_fraction(result.claim_rows, 0.5, random_state=1)
    assert len(fit_rows) == 30
    fitted = np.isin(result.claim_rows, fit_rows)
    calibrator = fit_calibrator(result.claim_scores[fitted], result.hallucinated[fitted])
    p = calibrator.predict(result.claim_scores[~fitted])
    assert first.ece == pytest.approx(ece(p, result.hallucinated[~fitted]), abs=1e-12)
    assert first.brier == pytest.approx(np.mean((p - result.hallucinated[~fitted]) ** 2), abs=1e-12)
    assert first.n_fit_samples == 30 and first.n_eval_samples == 30
    assert first.ece_interval[0] <= first.ece_interval[1]
    # fitting on another table: samples it shares with the evaluated one are not measured
    fit_table = evaluate_signals(rows[:20], _signals(rows),
                                 evaluation=EvaluationOptions(bootstrap=None, min_coverage=0))
    (cal, _) = calibrate_table(table, fit_table=fit_table, bootstrap=None)
    assert cal.n_eval_samples == 40 and cal.ece_interval is None
    # without bootstrap the fitting half is still the one split_seed draws
    (no_interval, _) = calibrate_table(table, fit_fraction=0.5, bootstrap=None, split_seed=1)
    assert no_interval.ece == first.ece and no_interval.ece_interval is None
    with pytest.raises(ValueError, match="exactly one"):
        calibrate_table(table)


def test_options_object_drives_every_option_and_training_rows_can_be_included(rows):
    ids = [r[schema.GENERATION_ID] for r in rows]
    trained = {"max_likelihood": frozenset(ids[:10])}
    options = EvaluationOptions(aggregation=("product", "mean"), by="lang", bootstrap=None, floors=False)
    held_out = evaluate_signals(rows, _signals(rows), evaluation=options, training_rows=trained)
    assert [(r.signal_name, r.aggregator) for r in held_out.results] == [
        ("max_likelihood", "product"), ("max_likelihood", "mean"), ("noise", "product"), ("noise", "mean")]
    assert held_out.floors == [] and held_out.training_excluded == {"max_likelihood": 10, "noise": 0}
    assert held_out.results[0].score.n_samples == len(rows) - 10 and set(held_out.results[0].score.by) == {"lang"}
    from dataclasses import replace

    everything = evaluate_signals(rows, _signals(rows), evaluation=replace(options, include_training_rows=True),
                                  training_rows=trained)
    assert everything.training_excluded == {"max_likelihood": 0, "noise": 0}
    assert everything.results[0].score.n_samples == len(rows)
    with pytest.raises(TypeError, match="evaluation must be an EvaluationOptions"):
        evaluate_signals(rows, _signals(rows), evaluation={"bootstrap": None})


def test_floors_change_no_process_wide_warnings_state(rows, monkeypatch):
    """The floors score the methods' claims again without repeating the single-class warning; they must do it
    without touching ``warnings.filters``, which every thread of a server shares."""
    from much_metric.report import _evaluation

    seen = []
    original = _evaluation.score_claims

    def spy(*args, **kwargs):
        seen.append(list(warnings.filters))
        return original(*args, **kwargs)

    monkeypatch.setattr(_evaluation, "score_claims", spy)
    one_class = [dict(r, **{schema.LABELS: [1] * len(r[schema.LABELS])}) for r in rows]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        table = evaluate_signals(one_class, _signals(one_class), evaluation=EvaluationOptions(bootstrap=None))
    assert len(table.floors) == 3 and len(seen) >= 3  # the three floors (and the methods, scored the same way)
    assert all(filters == before for filters in seen)
    single_class = [w for w in caught if "no hallucinated claim" in str(w.message)]
    assert len(single_class) == 2  # once per method (max_likelihood, noise), not again for the three floors
