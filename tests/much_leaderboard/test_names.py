"""Names and fairness on the board (issue 35): one row per signal labelled by method and signal, no built-in's
name, no other submitter's entry name, built-in rows not listed twice, a daily limit per submitter, learned
signals labelled by their detector and refused when trained on the evaluation rows, bounded unused files, timings
of signals the archive holds. Every refusal leaves nothing stored."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from much_leaderboard import Leaderboard
from much_leaderboard._table import render_table, table_rows
from tests.much_leaderboard._helpers import jsonl_bytes, make_zip, sample_signal, store_is_empty, valid_archive


def _refused(board: Leaderboard, archive: bytes, form: dict, match: str) -> str:
    before = sorted(s["id"] for s in board.store.submissions())
    archives = sorted(p.name for p in (board.store.folder / "archives").iterdir())
    outcome = board.submit(archive, form)
    assert outcome.status == "rejected", outcome
    assert match in outcome.message, outcome.message
    assert sorted(s["id"] for s in board.store.submissions()) == before  # nothing stored
    assert sorted(p.name for p in (board.store.folder / "archives").iterdir()) == archives
    return outcome.message


@pytest.fixture(scope="module")
def builtin_values():
    import much_dataset
    from much_metric.baselines import compute_signals

    dataset = much_dataset.load("sample", split="test")
    run = compute_signals(dataset, ["token_entropy_24"], progress=False)["token_entropy_24"]
    return {gid: np.asarray(run.values[gid], np.float64) for gid in dataset["generation_id"]}


def test_signal_named_like_a_builtin_is_refused(tmp_path, evaluation):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    noisy = sample_signal(seed=1)  # max_likelihood values with noise: not the built-in's
    message = _refused(board, make_zip({"m.jsonl": jsonl_bytes(noisy, "max_likelihood")}), {"method": "mine"},
                       "named like the built-in baseline")
    assert "'max_likelihood'" in message and "rename" in message
    # a parametrised built-in name and one needing a model: refused as well
    _refused(board, make_zip({"m.jsonl": jsonl_bytes(noisy, "token_entropy_7")}), {"method": "mine"},
             "named like the built-in baseline")
    _refused(board, make_zip({"m.jsonl": jsonl_bytes(noisy, "ccp_10_8")}), {"method": "mine"},
             "named like the built-in baseline")
    # issue #44: compared as entry names are (case-folded): Max_Likelihood is max_likelihood
    for name in ("Max_Likelihood", "MAX_LIKELIHOOD", "Token_Entropy_24"):
        _refused(board, make_zip({"m.jsonl": jsonl_bytes(noisy, name)}), {"method": "mine"},
                 "named like the built-in baseline")
    assert store_is_empty(tmp_path / "store")


def test_builtin_rows_of_a_run_folder_are_not_listed_again(tmp_path, evaluation, builtin_values):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    mine = sample_signal(seed=2)["max_likelihood"]
    archive = make_zip({"token_entropy_24.jsonl": jsonl_bytes({"token_entropy_24": builtin_values}),
                        "mine.jsonl": jsonl_bytes({"mine": mine}),
                        "timings.json": json.dumps({"mine": {"seconds": 1.0},
                                                    "token_entropy_24": {"seconds": 2.0}}).encode()})
    outcome = board.submit(archive, {"method": "run folder"})
    assert outcome.status == "accepted" and outcome.signals == ["mine"], outcome
    assert "token_entropy_24" in outcome.message and "not listed again" in outcome.message
    assert [r["signal"] for r in board.store.rows()] == ["mine"]
    # only built-ins' own values: nothing new, refused
    _refused(board, make_zip({"t.jsonl": jsonl_bytes({"token_entropy_24": builtin_values})}), {"method": "copy"},
             "nothing new")
    # a restart re-parses the stored archive the same way
    board.store.discard(outcome.submission)
    board.store.add_pending(archive, {"method": "run folder", "authors": "", "link": "", "needs": []})
    board.recover()
    assert [r["signal"] for r in board.store.rows()] == ["mine"]


def test_each_signal_is_its_own_row_labelled_by_method_and_signal(tmp_path, evaluation):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    two = {"alpha": sample_signal(seed=3)["max_likelihood"], "random": sample_signal(seed=4)["max_likelihood"]}
    assert board.submit(make_zip({"s.jsonl": jsonl_bytes(two)}), {"method": "Two Signals"}).status == "accepted"
    rows = table_rows(board.store.rows(), board.ranking())
    assert sorted(r["label"] for r in rows) == ["Two Signals / alpha", "Two Signals / random"]
    page = render_table(rows, langs=board.data.langs)
    assert "Two Signals / alpha" in page and "Two Signals / random" in page


def test_entry_name_of_another_submitter_is_refused(tmp_path, evaluation, signals):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    assert board.submit(valid_archive(signals), {"method": "Shared", "authors": "Ada"}).status == "accepted"
    _refused(board, valid_archive(sample_signal(seed=5)), {"method": "  shared ", "authors": "Bob"},
             "already used by another submitter")
    _refused(board, valid_archive(sample_signal(seed=5)), {"method": "ｓｈａｒｅｄ", "authors": "Bob"},  # full-width
             "already used by another submitter")
    _refused(board, valid_archive(sample_signal(seed=5)), {"method": "max_likelihood", "authors": "Bob"},
             "built-in baseline")
    # the same submitter may send a new version under its name
    assert board.submit(valid_archive(sample_signal(seed=5)), {"method": "Shared", "authors": " ada"}
                        ).status == "accepted"


def test_submissions_per_submitter_per_day_are_limited(tmp_path, evaluation):
    board = Leaderboard(tmp_path / "store", data=evaluation, daily_limit=2)
    archives = [valid_archive(sample_signal(seed=10 + i)) for i in range(4)]
    for archive in archives[:2]:
        assert board.submit(archive, {"method": "daily", "authors": "Ada"}).status == "accepted"
    message = _refused(board, archives[2], {"method": "daily", "authors": "Ada"}, "at most 2 submissions")
    assert "24 hours" in message
    assert board.submit(archives[2], {"method": "other", "authors": "Bob"}).status == "accepted"  # another submitter
    with sqlite3.connect(board.store.path) as db:  # a day later the quota is back
        db.execute("UPDATE submissions SET submitted = submitted - 90000")
    assert board.submit(archives[3], {"method": "daily", "authors": "Ada"}).status == "accepted"
    with pytest.raises(ValueError, match="daily_limit"):
        Leaderboard(tmp_path / "s2", data=evaluation, daily_limit=0)


def _learned_archive(values: dict, training_ids: list[str], *, detector: dict | None = None) -> bytes:
    detector = detector or {"kind": "linear", "protocol": "leave-one-language-out", "fold": "de"}
    lines = [json.dumps({"generation_id": gid, "signal_name": "learned_lin", "values": [float(x) for x in v],
                         "metadata": {"training_generation_ids": training_ids, "detector": detector}})
             for gid, v in values.items()]
    return make_zip({"learned_lin.jsonl": ("\n".join(lines) + "\n").encode()})


def test_learned_signal_trained_on_evaluation_rows_is_refused(tmp_path, evaluation, signals):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    values = signals["max_likelihood"]
    seen = sorted(values)[:3] + ["elsewhere-1"]
    message = _refused(board, _learned_archive(values, seen), {"method": "leaky"}, "trained or validated on 3")
    assert "leave-one-language-out" in message and "fold de" in message
    _refused(board, _learned_archive(values, []), {"method": "no ids"}, "training_generation_ids")
    assert store_is_empty(tmp_path / "store")


def test_learned_signal_row_names_its_detector(tmp_path, evaluation, signals):
    """Training rows the board does not know: listed, but its protocol is not taken from the archive (#44)."""
    board = Leaderboard(tmp_path / "store", data=evaluation)
    archive = _learned_archive(signals["max_likelihood"], ["train-a", "train-b"])
    outcome = board.submit(archive, {"method": "held out", "needs": ["probabilities only"]})
    assert outcome.status == "accepted", outcome
    [row] = table_rows(board.store.rows(), board.ranking())
    assert "probabilities only" not in row["needs"] and "training on the auto split" in row["needs"]
    page = render_table([row], langs=board.data.langs)
    assert "trained: linear, protocol not verified (its training rows are not rows of sample) (2 rows)" in page
    assert "leave-one-language-out" not in page
    assert "probabilities only" not in page
    assert table_rows(board.store.rows(), board.ranking(), needs=("training on the auto split",))


@pytest.fixture(scope="module")
def german():
    import much_dataset
    from much_leaderboard import EvaluationData

    return EvaluationData(dataset=much_dataset.load("sample", "de", split="test"), n_resamples=50)


@pytest.mark.parametrize("detector, accepted", [
    ({"kind": "linear", "protocol": "leave-one-language-out", "fold": "lang=de"}, True),
    ({"kind": "linear", "protocol": "auto-to-manual", "fold": None}, False),  # test-split rows, not the auto split
    ({"kind": "linear", "protocol": "leave-one-language-out", "fold": "lang=fr"}, False),  # French training rows
    ({"kind": "linear", "protocol": "random-split", "fold": None}, False),  # no protocol of the toolkit
])
def test_a_learned_signal_is_labelled_by_what_its_training_rows_show(tmp_path, german, detector, accepted):
    """Issue #44: the protocol is re-derived from the training rows the board knows (the sample's other languages),
    never copied from the archive: a claim they contradict is refused."""
    import much_dataset

    english_french = [g for lang in ("en", "fr")
                      for g in much_dataset.load("sample", lang, split="test")["generation_id"]]
    values = {g: np.full(len(t), 0.5) + i * 1e-3 for i, (g, t) in enumerate(zip(
        german.dataset["generation_id"], german.dataset["output_tokens"], strict=True))}
    board = Leaderboard(tmp_path / "store", data=german)
    archive = _learned_archive(values, sorted(english_french), detector=detector)
    if not accepted:
        _refused(board, archive, {"method": "claims"}, "the board labels a detector by what its training rows show")
        return
    assert board.submit(archive, {"method": "claims"}).status == "accepted"
    [row] = table_rows(board.store.rows(), board.ranking())
    assert row["trained"].startswith("trained: linear, leave-one-language-out, fold lang=de")


def test_unused_files_are_bounded(tmp_path, evaluation, signals):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    base = {"m.jsonl": jsonl_bytes(signals, "mine")}
    _refused(board, make_zip({**base, "README.md": b"#" * (100 * 2**10)}), {"method": "m"},
             "may hold at most 65,536")
    _refused(board, make_zip({**base, ".DS_Store": b"\0" * (100 * 2**10)}), {"method": "m"},
             "may hold at most 65,536")
    _refused(board, make_zip({**base, "__MACOSX/._m.jsonl": b"\0" * (100 * 2**10)}), {"method": "m"},
             "may hold at most 65,536")
    _refused(board, make_zip({**base, "README.md": b"\xff\xfe"}), {"method": "m"}, "README.md: not UTF-8")
    assert store_is_empty(tmp_path / "store")
    assert board.submit(make_zip({**base, "README.md": b"# My method\n"}), {"method": "m"}).status == "accepted"


def test_timings_of_a_signal_not_in_the_archive_are_refused(tmp_path, evaluation, signals):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    archive = make_zip({"m.jsonl": jsonl_bytes(signals, "mine"),
                        "timings.json": json.dumps({"mine": {"seconds": 1}, "ghost": {"seconds": 2}}).encode()})
    _refused(board, archive, {"method": "m"}, "timings.json: signal(s) ['ghost'] are not in the archive")
    assert store_is_empty(tmp_path / "store")
