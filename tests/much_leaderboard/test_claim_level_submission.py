"""A submitter's claim-level signal (one value per claim, under a name ending with ``@claim``): the claim values
``much run --signals sample_rouge1`` computes, submitted under the submitter's own method name, are accepted by the
board and ranked with the metrics of those claim values -- the number ``much run`` printed, whatever its aggregator.
A claim-level signal with one value per token is refused with the count it needed."""

from __future__ import annotations

import json

import pytest

from much_leaderboard import Leaderboard
from much_metric.cli import main
from much_metric.signals import read_signals
from tests.much_leaderboard._helpers import jsonl_bytes, make_zip, valid_archive


@pytest.fixture(scope="module")
def claim_values(tmp_path_factory):
    out = tmp_path_factory.mktemp("signals")
    report = out.parent / f"{out.name}.json"
    assert main(["run", "--source", "sample", "--tokenizer", "smollm2", "--samples", "sample", "--signals",
                 "sample_rouge1", "--out", str(out), "--aggregator", "mean", "--bootstrap", "0", "--no-progress",
                 "--json", str(report)]) == 0
    (printed,) = json.loads(report.read_text())["results"]
    return read_signals(out)["sample_rouge1@claim"], printed


def test_a_claim_level_submission_is_accepted_and_scored_as_it_is(claim_values, tmp_path, evaluation, capsys):
    values, printed = claim_values
    capsys.readouterr()
    board = Leaderboard(tmp_path / "store", data=evaluation)
    archive = valid_archive({"mine": values}, name="my_consistency@claim")
    outcome = board.submit(archive, {"method": "my consistency", "authors": "Ada"})
    assert outcome.status == "accepted", outcome
    (row,) = [r for r in board.store.rows() if r["submission"] == outcome.submission]
    assert row["signal"] == "my_consistency@claim"
    assert row["metrics"]["overall"]["roc_auc"] == pytest.approx(printed["roc_auc"], abs=1e-12)


def test_a_claim_level_submission_with_token_values_is_refused(claim_values, tmp_path, evaluation):
    import much_dataset

    tokens = {row["generation_id"]: [0.5] * len(row["output_tokens"])
              for row in much_dataset.load("sample", split="test")}
    board = Leaderboard(tmp_path / "store", data=evaluation)
    outcome = board.submit(valid_archive({"mine": tokens}, name="my_consistency@claim"),
                           {"method": "my consistency", "authors": "Ada"})
    assert outcome.status == "rejected" and "chunks (one value per claim" in outcome.message, outcome


def _claim_length(arrays):
    """A claim-level method without resources (as a plugin's): 1 - 1/(its number of tokens)."""
    from much_metric.baselines.claims import claim_signal, claim_tokens

    return claim_signal(arrays, [[1.0 - 1.0 / len(c) for c in sample] for sample in claim_tokens(arrays, "x")])


def test_a_claim_level_built_in_s_name_is_checked_against_its_stored_values(tmp_path, evaluation):
    """The board computes the built-in a submission is named like to compare values: a claim-level one is found
    under its stored name (``<name>@claim``). An exact copy is left out as the built-in's own values; the bare name
    with other values is refused as an impersonation (a submitter's error, not a server error)."""
    from much_metric.baselines import Baseline, compute_signals, register, unregister

    register(Baseline(name="claim_length_board", compute=_claim_length, level="claim", top_k=0))
    try:
        (run,) = compute_signals(evaluation.dataset, ["claim_length_board"], progress=False).values()
        board = Leaderboard(tmp_path / "store", data=evaluation)
        copy = make_zip({"my_own@claim.jsonl": jsonl_bytes({"my_own@claim": run.values}),
                         "claim_length_board@claim.jsonl": jsonl_bytes({"claim_length_board@claim": run.values}),
                         "timings.json": b'{"my_own@claim": {"seconds": 1.0}}',
                         "hardware.json": b'{"device": "2 CPU cores"}'})
        copied = board.submit(copy, {"method": "lengths", "authors": "Ada"})
        tokens = {gid: [0.5] * len(t) for gid, t in zip(evaluation.dataset["generation_id"],
                                                         evaluation.dataset["output_tokens"], strict=True)}
        bare = board.submit(valid_archive({"x": tokens}, name="claim_length_board"),
                            {"method": "lengths two", "authors": "Ada"})
    finally:
        unregister("claim_length_board")
    assert copied.status == "accepted", copied
    assert "claim_length_board@claim: the built-in baseline's own values" in copied.message
    assert bare.status == "rejected" and "named like the built-in baseline" in bare.message, bare
