"""The main table and the submission page: escaping, filters, sort, figures."""

from __future__ import annotations

import re

import pytest

from much_leaderboard import Leaderboard
from much_leaderboard._table import published_html, render_submission, render_table, subsets, table_rows
from tests.much_leaderboard._helpers import sample_signal, valid_archive

SCRIPT = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def board(tmp_path_factory, evaluation, signals):
    board = Leaderboard(tmp_path_factory.mktemp("table") / "store", data=evaluation)
    board.add_baselines(("token_likelihood",))
    form = {"method": SCRIPT, "link": "https://example.org/?a=1&b=<x>", "needs": ["sampling"]}
    assert board.submit(valid_archive(signals, name="clean"), form).status == "accepted"
    assert board.submit(valid_archive(sample_signal(seed=1), name="noisy"), {"method": "noisy"}).status == "accepted"
    board.refresh_ranking()
    return board


def test_method_names_are_escaped_everywhere(board):
    rows = table_rows(board.store.rows(), board.ranking())
    page = render_table(rows, langs=board.data.langs)
    assert "<script>" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    submission = next(r["submission"] for r in rows if r["signal"] == "clean")
    detail = render_submission(board.store, submission)
    assert "<script>" not in detail and "&lt;script&gt;" in detail
    assert 'href="https://example.org/?a=1&amp;b=&lt;x&gt;"' in detail


def test_sort_by_any_metric_orders_rows(board):
    for sort in ("roc_auc", "prr", "pr_auc"):
        rows = table_rows(board.store.rows(), board.ranking(), sort=sort)
        values = [r["metrics"][sort] for r in rows]
        assert values == sorted(values, reverse=True) and [r["rank"] for r in rows][0] == 1
    with pytest.raises(ValueError, match="sort must be one of"):
        table_rows(board.store.rows(), board.ranking(), sort="bogus")


def test_language_filter_shows_that_language_values(board):
    assert "lang=fr" in subsets(board.data.langs, board.data.models)
    rows = table_rows(board.store.rows(), board.ranking(), subset="lang=fr")
    stored = {f"{r['submission']}/{r['signal']}": r for r in board.store.rows()}
    for row in rows:
        assert row["metrics"] == stored[row["key"]]["metrics"]["by"]["lang"]["fr"]
        assert row["metrics"]["n_samples"] < 606
    # the French values are what the toolkit computes on the French samples alone
    from much_metric.report import EvaluationOptions, evaluate_signals

    fr = board.data.dataset.filter(lambda r: r["lang"] == "fr")
    noisy = next(r for r in rows if r["signal"] == "noisy")
    direct = evaluate_signals(fr, {"noisy": sample_signal(seed=1)["max_likelihood"]},
                              evaluation=EvaluationOptions(bootstrap=None, min_coverage=0.0))
    assert noisy["metrics"]["roc_auc"] == pytest.approx(direct.results[0].score.roc_auc, abs=1e-12)


def test_model_and_kind_and_needs_filters(board):
    model = board.data.models[0]
    rows = table_rows(board.store.rows(), board.ranking(), subset=f"model={model}")
    assert rows and all(r["metrics"]["n_samples"] <= 606 for r in rows)
    only_baselines = table_rows(board.store.rows(), board.ranking(), kinds=("baseline",))
    assert [r["signal"] for r in only_baselines] == ["token_likelihood"]
    sampling = table_rows(board.store.rows(), board.ranking(), needs=["sampling"])
    assert [r["signal"] for r in sampling] == ["clean"]
    page = render_table(table_rows(board.store.rows(), board.ranking(), needs=["hidden states"]), langs=())
    assert "No row matches" in page


def test_table_shows_intervals_p_rank_and_baseline_label(board):
    page = render_table(table_rows(board.store.rows(), board.ranking()), langs=board.data.langs)
    assert len(re.findall(r'<tr data-key=', page)) == 3
    assert "baseline (built-in)" in page and re.search(r'class="ci">\[0\.\d{3}, 0\.\d{3}\]', page)
    assert "P(rank) (ROC-AUC)" in page and "ROC-AUC by language (gap)" in page
    assert re.search(r"<td>de 0\.\d{3}<br>en 0\.\d{3}<br>es 0\.\d{3}<br>fr 0\.\d{3}<br>", page)  # one cell
    assert re.search(r"coverage 100\.0% · submitted \d{4}-\d{2}-\d{2}", page)  # under the method's name


def test_submission_page_has_figures_and_refuses_bad_ids(board):
    rows = table_rows(board.store.rows(), board.ranking())
    detail = render_submission(board.store, rows[0]["submission"])
    assert detail.count('src="data:image/png;base64,') == 1 and "ROC, PR and rejection curves" in detail
    assert "No such submission" in render_submission(board.store, "../../etc/passwd")
    assert "No such submission" in render_submission(board.store, "0" * 64)


def test_published_rows_are_labelled():
    page = published_html()
    assert "not re-scored on this server" in page and "CCP-10-8" in page


def test_selection_filter_on_data_with_human_labels(tmp_path, signals):
    import much_dataset
    from much_dataset.selection import select_samples
    from much_leaderboard import EvaluationData
    from much_metric.report import EvaluationOptions, evaluate_signals

    sample = much_dataset.load("sample", split="test")
    labelled = sample.map(lambda row, i: {"human_labels_0": row["labels"] if i < 100 else [0],
                                          "human_labels_1": row["labels"] if i < 100 else [0]}, with_indices=True)
    data = EvaluationData("sample-with-human-labels", n_resamples=40, dataset=labelled)
    assert data.selections == ("manual", "auto")
    assert subsets(data.langs, data.models, data.selections)[-2:] == ["selection=manual", "selection=auto"]
    board = Leaderboard(tmp_path / "store", data=data)
    assert board.submit(valid_archive(signals), {"method": "m"}).status == "accepted"
    manual = table_rows(board.store.rows(), board.ranking(), subset="selection=manual")[0]["metrics"]
    auto = table_rows(board.store.rows(), board.ranking(), subset="selection=auto")[0]["metrics"]
    assert (manual["n_samples"], auto["n_samples"]) == (100, 506)
    direct = evaluate_signals(select_samples(labelled, manual=True), {"my_method": signals["max_likelihood"]},
                              evaluation=EvaluationOptions(bootstrap=None, min_coverage=0.0))
    assert manual["roc_auc"] == pytest.approx(direct.results[0].score.roc_auc, abs=1e-12)
