"""Label sources: every row re-scored under each labelling of the same claims (the sample's hard and soft Mu-SHROOM
labels; MUCH's judges and its agreed human labels), with Kendall's tau between the rankings."""

from __future__ import annotations

import numpy as np
import pytest

from much_dataset import schema
from much_leaderboard import Leaderboard
from much_leaderboard._label_sources import LabelSources
from much_leaderboard._private_pages import render_label_sources
from much_leaderboard._ranks import competition_ranks, kendall_tau
from tests.much_leaderboard._helpers import sample_signal, valid_archive


def test_kendall_tau_is_scipys_tau_b_with_ties():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 12))
        a, b = rng.integers(0, 4, n).astype(float), rng.integers(0, 4, n).astype(float)
        expected = kendalltau(a, b).statistic
        found = kendall_tau(a, b)
        assert (found is None and np.isnan(expected)) or found == pytest.approx(expected, abs=1e-12)
    assert competition_ranks([0.5, 0.7, 0.7, 0.1]) == [3, 1, 1, 4]


def test_the_sample_hard_and_soft_labels_rank_the_same_detectors(tmp_path, hidden_split, public_evaluation):
    from much_dataset.label_files import read_label_file
    from much_metric.report import EvaluationOptions, evaluate_signals

    board = Leaderboard(tmp_path / "store", data=public_evaluation)
    board.add_baselines()
    signals = sample_signal(seed=21)["max_likelihood"]
    public = {gid: v for gid, v in signals.items() if gid not in hidden_split.private_ids}
    assert board.submit(valid_archive({"noisy": public}, name="noisy"), {"method": "Noisy"}).status == "accepted"
    sources = board.label_sources
    assert [s.name for s in sources.sources] == ["labels", "soft"]
    table = sources.table(board.store.rows(), board.store.scores, board.store.version())
    stored = {f"{r['submission']}/{r['signal']}": r["metrics"]["overall"]["roc_auc"] for r in board.store.rows()}
    # the "labels" source is the board's own ROC-AUC, recomputed from the stored claims
    for row in table["rows"]:
        assert row["roc_auc"]["labels"] == pytest.approx(stored[row["key"]], abs=1e-12)
    # differential: the soft source is the toolkit's evaluation with the soft labels put in the labels column
    soft = read_label_file(hidden_split.public / "label_sources" / "soft.json").rows
    relabelled = public_evaluation.dataset.map(lambda gid: {"labels": soft[gid]["labels"]},
                                               input_columns=schema.GENERATION_ID)
    from much_metric.baselines import compute_signals

    values = {"noisy": public, **{name: run.values for name, run in compute_signals(
        relabelled, ["max_likelihood", "token_likelihood", "token_entropy_24", "ktc"], progress=False).items()}}
    expected = {r.signal_name: r.score.roc_auc for r in evaluate_signals(
        relabelled, values, evaluation=EvaluationOptions(bootstrap=None, floors=False)).results}
    for row in table["rows"]:
        assert row["roc_auc"]["soft"] == pytest.approx(expected[row["signal"]], abs=1e-12)
    tau, n = table["tau"][("labels", "soft")]
    assert n == 5 and tau == pytest.approx(kendall_tau([r["roc_auc"]["labels"] for r in table["rows"]],
                                                       [r["roc_auc"]["soft"] for r in table["rows"]]))
    page = render_label_sources(table)
    assert 'id="much-label-source-table"' in page and 'id="much-label-source-tau"' in page
    assert "every annotator marked" in page  # the soft source describes itself


def test_human_labels_are_a_source_where_both_annotators_agree():
    import much_dataset
    from much_leaderboard import EvaluationData

    rows = much_dataset.load("sample", split="test").select(range(60))
    agreed = set(range(0, 60, 3))

    def humans(row, index):
        labels = list(row[schema.LABELS])
        flipped = [-v for v in labels[:-1]] + [1]
        return {schema.HUMAN_LABELS_0: flipped if index in agreed else [0],
                schema.HUMAN_LABELS_1: flipped if index in agreed else [0]}

    data = EvaluationData("memory", n_resamples=40, dataset=rows.map(humans, with_indices=True))
    sources = LabelSources(data)
    assert [s.name for s in sources.sources] == ["labels", "human-agreed"]
    assert sources.sources[1].n_rows == len(agreed)
    evaluated = int(sources.n_eval[sorted(agreed)].sum())
    labels = np.concatenate([np.asarray(rows[i][schema.LABELS][:-1]) == -1 for i in sorted(agreed)])
    start = sources.starts[sorted(agreed)]
    got = np.concatenate([sources.sources[1].hallucinated[s: s + n] for s, n in
                          zip(start, sources.n_eval[sorted(agreed)], strict=True)])
    assert len(got) == evaluated and np.array_equal(got, ~labels)  # the flipped labels, on those rows only
