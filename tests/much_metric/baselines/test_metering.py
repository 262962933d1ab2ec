"""Every signal file records what computing it cost (issue #48): wall and CPU seconds, the claims and tokens covered,
the machine and threads, the models' forward passes; summed over a resumed run; per input view."""

from __future__ import annotations

import numpy as np
import pytest

import much_dataset
from much_metric.baselines import ResourceOptions, SignalOptions, compute_signals
from much_metric.signals import cost_of, read_signal_metadata
from tests.much_metric._baselines_helpers import mushroom_rows, tiny_nli_parts


@pytest.fixture(scope="module")
def rows():
    return much_dataset.load("sample", split="test").select(range(40))


def _claims(rows) -> int:
    return sum(len(chunks) - 1 for chunks in rows["token_chunks"])  # the EOS claim is not scored


def test_the_file_records_the_cost_of_computing_the_signal(rows, tmp_path):
    runs = compute_signals(rows, ["token_entropy_24", "max_likelihood"], out=tmp_path, progress=False)
    for name, run in runs.items():
        cost = cost_of(read_signal_metadata(tmp_path / f"{name}.parquet"))
        assert cost == run.cost
        assert (cost.n_samples, cost.n_claims) == (40, _claims(rows))
        assert cost.n_tokens == sum(len(t) for t in rows["output_tokens"])
        assert cost.wall_seconds > 0 and cost.cpu_seconds >= 0 and cost.top_k is None
        assert cost.seconds_per_claim == cost.wall_seconds / cost.n_claims
        assert (cost.forward_passes, cost.samples, cost.model_calls) == (0, 0, 0)  # the stored probabilities only
        assert cost.machines[0]["threads"]["cpus_available"] >= 1
        assert run.seconds == pytest.approx(cost.wall_seconds)  # the same clock as timings.json


def test_a_resumed_signal_adds_its_parts_and_keeps_its_view(rows, tmp_path):
    first = compute_signals(rows.select(range(15)), ["token_likelihood"], out=tmp_path, progress=False,
                            options=SignalOptions(top_k=3))["token_likelihood"].cost
    with pytest.raises(ValueError, match="computed on top-3; resuming it on the stored candidates"):
        compute_signals(rows, ["token_likelihood"], out=tmp_path, progress=False)
    total = compute_signals(rows, ["token_likelihood"], out=tmp_path, progress=False,
                            options=SignalOptions(top_k=3))["token_likelihood"].cost
    assert (total.n_samples, total.n_claims, total.top_k) == (40, _claims(rows), 3)
    assert total.wall_seconds > first.wall_seconds
    # nothing left to do: the values are the stored data's on any view that serves the method, read back as they are
    assert compute_signals(rows, ["token_likelihood"], out=tmp_path, progress=False)["token_likelihood"].cost == total


def test_a_signal_that_reads_deeper_than_the_view_is_refused(rows):
    with pytest.raises(ValueError, match=r"token_entropy_24 \(top-24\) read more than the top-5 candidates"):
        compute_signals(rows, ["token_likelihood", "token_entropy_24"], progress=False,
                        options=SignalOptions(top_k=5))
    view = compute_signals(rows, ["token_entropy_5"], progress=False, options=SignalOptions(top_k=5))
    full = compute_signals(rows, ["token_entropy_5"], progress=False)
    assert all(np.array_equal(view["token_entropy_5"].values[g], v) for g, v in full["token_entropy_5"].values.items())


@pytest.mark.slow
def test_an_nli_signal_records_the_forward_passes_it_ran(tmp_path):
    from much_metric.baselines import NliBatching, NliScorer

    model, tokenizer = tiny_nli_parts()
    data = mushroom_rows(tokenizer, 2, lang="en", max_tokens=7)
    scorer = NliScorer(model, tokenizer, batching=NliBatching(batch_size=4), progress=False)
    runs = compute_signals(data, ["sar_3"], out=tmp_path, progress=False,
                           resources=ResourceOptions(nli=scorer, tokenizer=tokenizer))
    (name, run), = runs.items()
    assert run.cost.forward_passes == scorer.forward_passes > 1  # 4 pairs per pass
    assert cost_of(read_signal_metadata(tmp_path / f"{name}.parquet")).forward_passes == scorer.forward_passes
    assert scorer.usage() == {"forward_passes": scorer.forward_passes}
