from __future__ import annotations

import pytest

from tests.much_metric.leaderboard._helpers import sample_signal


@pytest.fixture(scope="session")
def signals():
    return sample_signal()


@pytest.fixture(scope="session")
def evaluation():
    from much_metric.leaderboard import EvaluationData

    return EvaluationData(n_resamples=50)
