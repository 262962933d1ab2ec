import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from much_metric.scoring._bootstrap import (
    bootstrap_distribution,
    bootstrap_intervals,
    paired_bootstrap,
    resample_counts,
)
from much_metric.scoring._ranking import METRICS


def _data(seed=0, n_samples=150, signal=1.0):
    rng = np.random.default_rng(seed)
    claims_per_sample = rng.integers(0, 7, n_samples)  # some samples have no evaluated claim (EOS only)
    claim_sample = np.repeat(np.arange(n_samples), claims_per_sample)
    # A per-sample effect makes claims of one sample correlated, as in MUCH.
    sample_effect = rng.normal(0, 0.5, n_samples)[claim_sample]
    y = rng.random(len(claim_sample)) < 0.4
    s = signal * y + sample_effect + rng.normal(0, 1, len(y))
    return s, y, claim_sample, n_samples


def test_resample_counts_are_multinomial_draws():
    counts = resample_counts(50, 200, np.random.default_rng(1))
    assert counts.shape == (200, 50)
    assert (counts.sum(axis=1) == 50).all()
    assert abs(counts.mean() - 1.0) < 1e-12
    assert (counts == 0).mean() == pytest.approx((49 / 50) ** 50, abs=0.03)  # ~36.4% of samples left out


def test_distribution_equals_explicit_resampling_of_samples():
    s, y, claim_sample, n = _data(seed=3)
    (dist,) = bootstrap_distribution([s], y, claim_sample, n, n_resamples=40, random_state=11)
    counts = resample_counts(n, 25, np.random.default_rng(11))
    by_sample = [np.flatnonzero(claim_sample == i) for i in range(n)]
    for replicate in range(25):
        drawn = np.concatenate([np.tile(by_sample[i], counts[replicate, i]) for i in range(n)])
        assert dist["roc_auc"][replicate] == pytest.approx(roc_auc_score(y[drawn], s[drawn]), abs=1e-12)
        assert dist["average_precision"][replicate] == pytest.approx(
            average_precision_score(y[drawn], s[drawn]), abs=1e-12
        )


def test_intervals_are_seeded_and_bracket_the_estimate():
    s, y, claim_sample, n = _data(seed=5)
    first = bootstrap_intervals(s, y, claim_sample, n, n_resamples=300, random_state=0)
    again = bootstrap_intervals(s, y, claim_sample, n, n_resamples=300, random_state=0)
    other = bootstrap_intervals(s, y, claim_sample, n, n_resamples=300, random_state=1)
    assert first == again and first != other
    assert set(first) == set(METRICS)
    point = roc_auc_score(y, s)
    low, high = first["roc_auc"]
    assert low < point < high and 0.02 < high - low < 0.3


def test_interval_narrows_with_more_samples():
    small = bootstrap_intervals(*_data(seed=2, n_samples=60), n_resamples=300)["roc_auc"]
    large = bootstrap_intervals(*_data(seed=2, n_samples=1500), n_resamples=300)["roc_auc"]
    assert large[1] - large[0] < (small[1] - small[0]) / 2


def test_paired_comparison_detects_a_better_method_and_not_an_identical_one():
    s, y, claim_sample, n = _data(seed=8, n_samples=300, signal=1.5)
    noise = np.random.default_rng(0).normal(0, 1, len(s))
    weak = s + 3 * noise
    result = paired_bootstrap(s, weak, y, claim_sample, n, n_resamples=400)
    roc = result["roc_auc"]
    assert roc["a"] == pytest.approx(roc_auc_score(y, s)) and roc["b"] == pytest.approx(roc_auc_score(y, weak))
    assert roc["difference"] > 0 and roc["interval"][0] > 0 and roc["p_value"] < 0.01
    same = paired_bootstrap(s, s, y, claim_sample, n, n_resamples=200)
    for key in METRICS:
        assert same[key]["difference"] == 0 and same[key]["interval"] == (0.0, 0.0)
        assert same[key]["p_value"] == 1.0


def test_validation():
    s, y, claim_sample, n = _data()
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_intervals(s, y, claim_sample, n, n_resamples=0)
    with pytest.raises(ValueError, match="confidence_level"):
        bootstrap_intervals(s, y, claim_sample, n, confidence_level=1.5)
    with pytest.raises(ValueError, match="same claims"):
        paired_bootstrap(s, s[:-1], y, claim_sample, n)


@pytest.mark.parametrize("n_resamples", [1, 10, 39, 40, 1000, 100_000, 100_001])
def test_one_resample_rule_for_bootstrap_evaluation_and_commands(n_resamples):
    """Bootstrap, EvaluationOptions, the commands' --bootstrap and the leaderboard accept the same counts: one
    constraint (RESAMPLES, 40 to 100000) that all of them read; only a command's 0 means "no bootstrap"."""
    from much_metric.report import EvaluationOptions
    from much_metric.scoring import RESAMPLES, Bootstrap, check_resamples

    def accepts(build) -> bool:
        try:
            build()
        except ValueError:
            return False
        return True

    expected = RESAMPLES.is_satisfied_by(n_resamples)
    assert accepts(lambda: Bootstrap(n_resamples=n_resamples)) is expected
    assert accepts(lambda: EvaluationOptions(bootstrap=Bootstrap(n_resamples=n_resamples))) is expected
    assert accepts(lambda: check_resamples(n_resamples, "--bootstrap")) is expected
    assert accepts(lambda: check_resamples(n_resamples, "--bootstrap", zero=False)) is expected
    assert check_resamples(0, "--bootstrap") == 0
    with pytest.raises(ValueError, match="no bootstrap: bootstrap=None"):
        check_resamples(0, "n_resamples", zero=False)
