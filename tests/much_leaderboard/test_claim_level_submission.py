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
from tests.much_leaderboard._helpers import valid_archive


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
