from __future__ import annotations

import pytest

from tests.much_leaderboard._helpers import sample_signal


@pytest.fixture(scope="session")
def signals():
    return sample_signal()


@pytest.fixture(scope="session")
def evaluation():
    from much_leaderboard import EvaluationData

    return EvaluationData(n_resamples=50)
