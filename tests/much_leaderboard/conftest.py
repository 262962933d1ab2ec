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


@pytest.fixture(scope="session")
def private_split(hidden_split):
    """The private split of ``hidden_split`` (half of the sample, labels in its label file), read by the server."""
    from much_leaderboard import PrivateSplit

    return PrivateSplit(hidden_split.private, hidden_split.labels)


@pytest.fixture(scope="session")
def public_evaluation(hidden_split):
    """The public split of ``hidden_split`` (the other half, labelled; with the sample's soft label source)."""
    from much_leaderboard import EvaluationData

    return EvaluationData(str(hidden_split.public), n_resamples=50)


@pytest.fixture(scope="session")
def private_truth(hidden_split):
    """The private rows WITH their labels, straight from the sample: the test's own ground truth (the server never
    sees it) for differential checks and the leak scanner."""
    import much_dataset

    sample = much_dataset.load("sample", split="test")
    return sample.filter(lambda gid: gid in hidden_split.private_ids, input_columns="generation_id")
