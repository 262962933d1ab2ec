"""The private board on a split made from half of the embedded sample: public rank, private rank and the shift;
built-in baselines scored on both; private values all-or-nothing; the daily quota; stored results follow the label
file."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from much_leaderboard import Leaderboard
from tests.much_leaderboard._helpers import sample_signal, valid_archive


def _board(folder, public_evaluation, private_split, **kwargs) -> Leaderboard:
    board = Leaderboard(folder, data=public_evaluation, **kwargs)
    board.add_baselines()
    board.attach_private(private_split)
    return board


def _truth_auc(private_truth, values: dict) -> float:
    """ROC-AUC of token values on the private rows, computed from the sample's own labels (not the label file)."""
    from much_metric.report import EvaluationOptions, evaluate_signals

    table = evaluate_signals(private_truth, values, evaluation=EvaluationOptions(bootstrap=None, floors=False))
    return table.results[0].score.roc_auc


def test_a_submission_shows_public_rank_private_rank_and_the_shift(tmp_path, public_evaluation, private_split,
                                                                     private_truth):
    from much_metric.baselines import compute_signals

    board = _board(tmp_path / "store", public_evaluation, private_split)
    signals = sample_signal(seed=5)  # every sample row: the public half and the private half
    outcome = board.submit(valid_archive(signals, name="noisy"), {"method": "Noisy", "authors": "a"})
    assert outcome.status == "accepted", outcome.message
    assert "private split ROC-AUC (rounded to 2 decimals): noisy 0." in outcome.message
    table = board.private.table(board.store.rows())
    assert table["n_ranked"] == 5 and table["n_claims"] == private_split.n_claims
    by_signal = {row["signal"]: row for row in table["rows"]}
    # differential: the shown value is the toolkit's evaluation on the sample's own labels, rounded
    ids = private_split.ids
    noisy = {gid: v for gid, v in signals["max_likelihood"].items() if gid in ids}
    assert by_signal["noisy"]["private"] == round(_truth_auc(private_truth, {"noisy": noisy}), 2)
    builtin = compute_signals(private_truth, ["token_entropy_24"], progress=False)["token_entropy_24"].values
    assert by_signal["token_entropy_24"]["private"] == round(_truth_auc(private_truth, {"t": builtin}), 2)
    # ranks: public by the stored public ROC-AUC, private by the shown (rounded) value, shift = difference
    rows = table["rows"]
    for row in rows:
        assert row["public_rank"] == 1 + sum(other["public"] > row["public"] for other in rows)
        assert row["private_rank"] == 1 + sum(other["private"] > row["private"] for other in rows)
        assert row["shift"] == row["public_rank"] - row["private_rank"]
        assert row["private"] == round(row["private"], 2)
    assert table["tau"] is not None and -1 <= table["tau"] <= 1


def test_private_values_are_all_or_nothing_and_checked_on_the_public_rows(tmp_path, public_evaluation,
                                                                           private_split):
    board = _board(tmp_path / "store", public_evaluation, private_split)
    full = sample_signal(seed=6)["max_likelihood"]
    private_ids = sorted(private_split.ids)
    partial = {gid: v for gid, v in full.items() if gid not in private_ids[:3]}
    outcome = board.submit(valid_archive({"m": partial}, name="m"), {"method": "Partial", "authors": "b"})
    assert outcome.status == "rejected"
    assert f"values for {len(private_ids) - 3} of the {len(private_ids)} private samples" in outcome.message
    only_private = {gid: full[gid] for gid in private_ids}
    outcome = board.submit(valid_archive({"m": only_private}, name="m"), {"method": "Only", "authors": "b"})
    assert outcome.status == "rejected" and "values for the private split only" in outcome.message
    bad = dict(full)
    bad[private_ids[0]] = np.append(bad[private_ids[0]], 0.5)
    outcome = board.submit(valid_archive({"m": bad}, name="m"), {"method": "Long", "authors": "b"})
    assert outcome.status == "rejected" and f"generation_id={private_ids[0]!r} (private split)" in outcome.message
    assert all(r["kind"] == "baseline" for r in board.store.rows())  # nothing stored
    # the refused submissions used no quota: a good one from the same submitter is accepted
    outcome = board.submit(valid_archive({"m": full}, name="m"), {"method": "Good", "authors": "b"})
    assert outcome.status == "accepted", outcome.message
    # public values only: accepted, listed without a private value
    public_only = {gid: v for gid, v in full.items() if gid not in private_split.ids}
    outcome = board.submit(valid_archive({"p": public_only}, name="p"), {"method": "Public", "authors": "b"})
    assert outcome.status == "accepted" and "no private-split values" in outcome.message
    row = next(r for r in board.private.table(board.store.rows())["rows"] if r["signal"] == "p")
    assert row["private"] is None and row.get("private_rank") is None


def test_the_private_daily_quota_per_submitter(tmp_path, public_evaluation, private_split):
    board = _board(tmp_path / "store", public_evaluation, private_split)
    first = board.submit(valid_archive(sample_signal(seed=7), name="q"), {"method": "Q", "authors": "Eve"})
    assert first.status == "accepted"
    again = board.submit(valid_archive(sample_signal(seed=8), name="q"), {"method": "Q", "authors": " eve "})
    assert again.status == "rejected"
    assert "at most 1 submission(s) with private-split values in 24 hours" in again.message
    assert board.submit(valid_archive(sample_signal(seed=7), name="q"), {"method": "Q", "authors": "Eve"}).status \
        == "duplicate"  # the same archive again is the same entry, not a new probe
    signals = sample_signal(seed=8)["max_likelihood"]
    public_only = {gid: v for gid, v in signals.items() if gid not in private_split.ids}
    assert board.submit(valid_archive({"q": public_only}, name="q"),
                        {"method": "Q", "authors": "Eve"}).status == "accepted"  # no private values: no quota
    assert board.submit(valid_archive(sample_signal(seed=8), name="q"),
                        {"method": "Other", "authors": "Mallory"}).status == "accepted"


def test_results_follow_the_label_file_and_stay_out_of_the_main_store(tmp_path, hidden_split, public_evaluation,
                                                                      private_split):
    import json

    from much_dataset import schema
    from much_dataset.label_files import LabelFile, read_label_file, write_label_file
    from much_leaderboard import PrivateSplit

    board = _board(tmp_path / "store", public_evaluation, private_split)
    outcome = board.submit(valid_archive(sample_signal(seed=9), name="r"), {"method": "R", "authors": "c"})
    before = board.private.table(board.store.rows())
    # a restart with the same label file scores nothing again
    restarted = Leaderboard(tmp_path / "store", data=public_evaluation)
    restarted.attach_private(private_split)
    assert restarted.private.table(restarted.store.rows()) == before
    # another label file (every label flipped) for the same rows: the shown values are recomputed, not served stale
    found = read_label_file(hidden_split.labels)
    flipped = {gid: {name: [-v if v != 0 else 0 for v in values] for name, values in row.items()}
               for gid, row in found.rows.items()}
    other = tmp_path / "flipped.json"
    write_label_file(other, LabelFile(name="private", rows=flipped, columns=schema.LABEL_COLUMNS,
                                      rows_sha256=found.rows_sha256))
    moved = Leaderboard(tmp_path / "store", data=public_evaluation)
    moved.attach_private(PrivateSplit(hidden_split.private, other))
    after = {r["key"]: r["private"] for r in moved.private.table(moved.store.rows())["rows"]}
    for row in before["rows"]:
        assert after[row["key"]] == pytest.approx(round(1 - row["private"], 2), abs=0.011)
    # the main store (what the hub mirror publishes) holds no private value
    with sqlite3.connect(tmp_path / "store" / "leaderboard.sqlite") as db:
        metrics = [json.loads(m) for (m,) in db.execute("SELECT metrics FROM rows")]
    assert all("private" not in json.dumps(m) for m in metrics)
    assert outcome.submission in {r["submission"] for r in moved.store.rows()}


def test_a_space_restored_from_the_hub_keeps_entries_with_private_values(tmp_path, monkeypatch, hidden_split,
                                                                        public_evaluation, private_split):
    """The mirror holds archives with private values: a fresh start re-scores them WITH the private split (attached
    before anything is re-scored), not as archives naming unknown samples."""
    import huggingface_hub.constants

    from much_leaderboard import HubMirror, start
    from tests.much_leaderboard._fake_hub import GOOD_TOKEN, LeaderboardHub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with LeaderboardHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        mirror = HubMirror("me/much-leaderboard", token=GOOD_TOKEN, endpoint=hub.endpoint, backoff=0.01)
        board = Leaderboard(tmp_path / "a", data=public_evaluation, mirror=mirror, private=private_split)
        outcome = board.submit(valid_archive(sample_signal(seed=41), name="kept"), {"method": "Kept", "authors": "k"})
        assert outcome.status == "accepted", outcome.message
        shown = {r["signal"]: r["private"] for r in board.private.table(board.store.rows())["rows"]}
        monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
        restored = start(tmp_path / "fresh", data=str(hidden_split.public), n_resamples=50, baselines=False,
                         mirror=HubMirror("me/much-leaderboard", endpoint=hub.endpoint), private=private_split)
        restored.join()
        assert [r["submission"] for r in restored.store.rows()] == [outcome.submission]
        again = {r["signal"]: r["private"] for r in restored.private.table(restored.store.rows())["rows"]}
        assert again == {"kept": shown["kept"]} and again["kept"] is not None
