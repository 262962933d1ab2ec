"""Issue 57: the paired Δ column (each method against a reference method, on the same claims and the same bootstrap
replicates) and the flags of rows a reader could over-read (not above a floor, heavy ties, too few samples).

The Δ column is checked against an independent path: :func:`much_metric.scoring.paired_bootstrap` of the two
methods' claim scores (one pair at a time) must give the same difference, interval and p-value."""

from __future__ import annotations

import numpy as np
import pytest

import much_dataset
from much_dataset.params import UnknownNameError
from much_metric.report import EvaluationOptions, evaluate_signals, method_key, paired_deltas
from much_metric.scoring import Bootstrap, paired_bootstrap

BOOTSTRAP = Bootstrap(n_resamples=100, random_state=3)


@pytest.fixture(scope="module")
def split():
    return much_dataset.load("sample", split="test")


def _signals(split, n_rows: int | None = None):
    from much_metric.baselines import max_likelihood, token_arrays, token_entropy

    rows = split if n_rows is None else split.select(range(n_rows))
    arrays = token_arrays(rows)
    rng = np.random.default_rng(0)
    likelihood = max_likelihood(arrays)
    return rows, {
        "max_likelihood": dict(zip(arrays.generation_ids, likelihood, strict=True)),
        "token_entropy": dict(zip(arrays.generation_ids, token_entropy(arrays), strict=True)),
        # most tokens score 0: most claims tie at one score
        "coarse": {g: (v > 0.95).astype(float) for g, v in zip(arrays.generation_ids, likelihood, strict=True)},
        "noise": {g: rng.random(len(v)) * 1e-3 for g, v in zip(arrays.generation_ids, likelihood, strict=True)},
    }


@pytest.fixture(scope="module")
def table(split):
    rows, signals = _signals(split)
    return evaluate_signals(rows, signals, evaluation=EvaluationOptions(bootstrap=None))


def test_each_difference_is_the_paired_bootstrap_of_that_pair(table):
    deltas = paired_deltas(table, metric="roc_auc", bootstrap=BOOTSTRAP)
    values = {method_key(r): r.score.roc_auc for r in table.results}
    assert deltas.chosen == "best" and values[deltas.baseline] == max(values.values())
    reference = next(r for r in table.results if method_key(r) == deltas.baseline)
    for result in table.results:
        key = method_key(result)
        if key == deltas.baseline:
            assert deltas.cell(key) == "ref."
            continue
        expected = paired_bootstrap(result.claim_scores, reference.claim_scores, result.hallucinated,
                                    np.searchsorted(np.unique(result.claim_rows), result.claim_rows),
                                    len(np.unique(result.claim_rows)), n_resamples=BOOTSTRAP.n_resamples,
                                    random_state=BOOTSTRAP.random_state)["roc_auc"]
        got = deltas.rows[key]
        assert got.difference == pytest.approx(expected["difference"])
        assert got.interval == pytest.approx(expected["interval"])
        assert got.p_value == pytest.approx(expected["p_value"])
        assert deltas.cell(key).startswith(f"{expected['difference']:+.3f} [")


def test_a_named_baseline_by_signal_or_display_name_and_a_typo_suggests(table):
    by_signal = paired_deltas(table, baseline="max_likelihood", bootstrap=None)
    by_display = paired_deltas(table, baseline="Max Likelihood", bootstrap=None,
                               display=lambda n: n.replace("_", " ").title())
    assert by_signal.baseline == by_display.baseline == "max_likelihood (product)"
    assert by_signal.chosen == "named" and "named by --baseline" in by_signal.describe()
    assert by_signal.rows["token_entropy (product)"].difference == pytest.approx(
        table.results[1].score.roc_auc - table.results[0].score.roc_auc)
    with pytest.raises(UnknownNameError, match="did you mean 'max_likelihood"):
        paired_deltas(table, baseline="max_likelihod", bootstrap=None)


def test_flags_rows_below_a_floor_with_ties_and_over_few_samples(split, table):
    deltas = paired_deltas(table, bootstrap=BOOTSTRAP)
    assert "floor" in deltas.flags["noise (product)"]  # noise is not above the length floor
    assert "floor" not in deltas.flags.get("max_likelihood (product)", {})
    assert "ties" in deltas.flags["coarse (product)"] and "ties" not in deltas.flags.get(
        "max_likelihood (product)", {})
    assert "n=" not in deltas.flag_cell("max_likelihood (product)")
    assert "not above that floor" in deltas.legend() and "share one score" in deltas.legend()
    rows, signals = _signals(split, n_rows=12)
    small = evaluate_signals(rows, signals, evaluation=EvaluationOptions(bootstrap=None, min_coverage=0))
    few = paired_deltas(small, bootstrap=BOOTSTRAP)
    assert "n=12" in few.flag_cell("max_likelihood (product)") and "< 30 samples" in few.legend()


def test_the_pareto_figure_draws_intervals_and_one_band_for_the_methods_not_separable(split):
    pytest.importorskip("matplotlib")
    from much_metric.report._cost import _points, pareto_figure
    from much_metric.signals import DeclaredCost

    rows, signals = _signals(split)
    table = evaluate_signals(rows, signals, evaluation=EvaluationOptions(bootstrap=BOOTSTRAP))
    table.costs = {name: DeclaredCost(seconds_per_claim=10.0 ** -k) for k, name in enumerate(signals)}
    table.deltas = paired_deltas(table, bootstrap=BOOTSTRAP)
    points = _points(table, str)
    for point in points:
        comparison = table.deltas.rows[f"{point['label']} (product)"]
        low, high = comparison.interval
        assert point["group"] == (f"{point['label']} (product)" == table.deltas.baseline or low <= 0 <= high)
        assert point["interval"] is not None
    assert any(p["group"] for p in points) and not all(p["group"] for p in points)
    axes = pareto_figure(points).axes[0]
    labels = axes.get_legend_handles_labels()[1]
    assert any("not separable" in label for label in labels) == (sum(bool(p["group"]) for p in points) > 1)
    assert len(axes.containers) == len(points)  # one error bar per point


def test_breakdown_rows_over_few_samples_are_flagged_where_printed(split):
    """``--by`` rows print intervals over their group's samples only: a group under MIN_INTERVAL_SAMPLES is
    flagged ``n=N`` (in much evaluate's flags column and the report's breakdown table), a large one is not."""
    from collections import Counter

    from much_metric.cli._evaluate_tables import format_table
    from much_metric.report import render_report
    from much_metric.report._delta import MIN_INTERVAL_SAMPLES

    languages = Counter(split["lang"])
    small, large = min(languages, key=languages.get), max(languages, key=languages.get)
    keep = [i for i, lang in enumerate(split["lang"]) if lang == large]
    keep += [i for i, lang in enumerate(split["lang"]) if lang == small][:MIN_INTERVAL_SAMPLES // 2]
    rows, signals = _signals(split.select(sorted(keep)))
    table = evaluate_signals(rows, {"max_likelihood": signals["max_likelihood"]},
                             evaluation=EvaluationOptions(bootstrap=BOOTSTRAP, by="lang"))
    deltas = paired_deltas(table, bootstrap=BOOTSTRAP)
    key = method_key(table.results[0])
    few = MIN_INTERVAL_SAMPLES // 2
    assert languages[large] >= MIN_INTERVAL_SAMPLES and deltas.flag_cell(key) == ""
    assert deltas.flag_cell(key, "lang", small) == f"n={few}"
    assert deltas.flag_cell(key, "lang", large) == ""
    assert "< 30 samples" in deltas.legend()
    table.deltas = deltas
    printed = format_table(table, deltas=deltas)
    line = next(line for line in printed.splitlines() if line.strip().startswith(f"lang={small}") and "n=" in line)
    assert line.rstrip().endswith(f"n={few}")
    assert f"lang={small} [n={few}]" in render_report(table) and f"lang={large} [n=" not in render_report(table)
