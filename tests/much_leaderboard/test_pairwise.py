"""The board's pairwise comparison (issue #57): the matrix against much_metric.compare called directly, Holm against
a loop written here, the cache after a submission, and the tab's HTML (matrix, cost figure, rows without a cost)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from much_leaderboard import Leaderboard
from much_leaderboard._pairwise import LEVEL, PAIRWISE_KEY, holm, pairwise_board
from much_leaderboard._pairwise_html import render_pairwise
from tests.much_leaderboard._helpers import sample_signal, valid_archive

BUILTINS = ("max_likelihood", "token_likelihood", "token_entropy_24")


def _holm_by_hand(p_values):
    """Holm's rule as its definition reads: sort, multiply the k-th smallest by m - k + 1, running maximum, cap."""
    finite = [(p, k) for k, p in enumerate(p_values) if np.isfinite(p)]
    finite.sort()
    out = [float("nan")] * len(p_values)
    running = 0.0
    for position, (p, k) in enumerate(finite):
        running = max(running, min(1.0, (len(finite) - position) * p))
        out[k] = running
    return out


def test_holm_matches_its_definition():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 30):
        p = rng.uniform(0, 0.2, n)
        p[rng.random(n) < 0.2] = np.nan
        assert np.allclose(holm(p), _holm_by_hand(list(p)), equal_nan=True)
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])


@pytest.fixture(scope="module")
def board(tmp_path_factory, evaluation):
    board = Leaderboard(tmp_path_factory.mktemp("pairwise"), data=evaluation)
    board.add_baselines(BUILTINS)
    return board


def test_every_cell_is_much_metric_compare_on_the_same_claims(board, evaluation):
    """Differential: each cell's difference, interval and p-value are those of ``much_metric.compare`` called on the
    two methods' token scores with the board's bootstrap (product aggregator, seed 0)."""
    import much_metric
    from much_metric.baselines import compute_signals

    payload = board.pairwise()
    assert payload is not None and len(payload["keys"]) == len(BUILTINS)
    data = evaluation.dataset
    runs = compute_signals(data, list(BUILTINS), progress=False)
    ids = data["generation_id"]
    token_scores = {name: [np.asarray(runs[name].values[g], np.float64) for g in ids] for name in BUILTINS}
    signal = [key.split("/", 1)[1] for key in payload["keys"]]
    masks = data["stopword_mask"] if "stopword_mask" in data.column_names else None
    for i in range(len(signal)):
        for j in range(len(signal)):
            if i == j:
                assert payload["cells"][i][j] is None
                continue
            direct = much_metric.compare(token_scores[signal[i]], token_scores[signal[j]], data["token_chunks"],
                                         data["labels"], masks, aggregation="product",
                                         bootstrap=evaluation.bootstrap, generation_ids=ids).roc_auc
            cell = payload["cells"][i][j]
            assert cell["difference"] == pytest.approx(direct.difference, abs=1e-12)
            assert cell["interval"] == pytest.approx(list(direct.interval), abs=1e-12)
            assert cell["p_value"] == pytest.approx(direct.p_value, abs=1e-12)
            assert payload["values"][i] == pytest.approx(direct.a, abs=1e-12)


def test_the_matrix_agrees_with_the_boards_own_paired_column_and_holm(board):
    """Column #1 is the table's "Δ #1" (the ranking's versus_best), the matrix is antisymmetric, the Holm values are
    those of the shown pairs' p-values, and separable means Holm p < LEVEL."""
    payload, ranking = board.pairwise(), board.ranking()
    cells, n = payload["cells"], len(payload["keys"])
    for i in range(1, n):
        versus = ranking[payload["keys"][i]]["versus_best"]
        assert cells[i][0]["difference"] == pytest.approx(versus["difference"], abs=1e-12)
        assert cells[i][0]["p_value"] == pytest.approx(versus["p_value"], abs=1e-12)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    adjusted = _holm_by_hand([cells[i][j]["p_value"] for i, j in pairs])
    for (i, j), p in zip(pairs, adjusted, strict=True):
        assert cells[i][j]["difference"] == pytest.approx(-cells[j][i]["difference"], abs=1e-12)
        assert cells[i][j]["p_holm"] == pytest.approx(p) and cells[j][i]["p_holm"] == pytest.approx(p)
        assert cells[i][j]["separable"] == cells[j][i]["separable"] == (p < LEVEL)
    assert payload["values"] == sorted(payload["values"], reverse=True)
    assert payload["best_group"] == [k == 0 or not cells[k][0]["separable"] for k in range(n)]


def test_only_the_top_rows_are_shown_and_the_rule_is_stated():
    rng = np.random.default_rng(1)
    n_claims = 400
    hallucinated = rng.random(n_claims) < 0.4
    claim_rows = np.repeat(np.arange(100), 4)
    arrays = [{"claim_scores": hallucinated * quality + rng.random(n_claims), "hallucinated": hallucinated,
               "claim_rows": claim_rows} for quality in np.linspace(0, 1, 15)]
    keys = [f"{k:064x}/s{k}" for k in range(15)]
    payload = pairwise_board(keys, arrays, None, top=12)
    assert len(payload["keys"]) == 12 and payload["n_rows"] == 15 and payload["n_resamples"] == 0
    assert payload["keys"][0] == keys[-1]  # the best quality first
    assert not any(c["separable"] for line in payload["cells"] for c in line if c)  # no bootstrap: nothing
    text = html.unescape(render_pairwise(payload, []))
    assert "the 12 best of the board's 15 rows" in text and "without bootstrap" in text


def test_a_submission_invalidates_the_cached_matrix(tmp_path, evaluation):
    """Never stale: the matrix is recomputed for the new board state (the new row appears), and a cached matrix of
    an older state is not served while the new one is computed."""
    board = Leaderboard(tmp_path / "store", data=evaluation)
    board.add_baselines(("max_likelihood",))
    before = board.pairwise()
    assert before is not None and len(before["keys"]) == 1
    outcome = board.submit(valid_archive(sample_signal(seed=3), name="fresh"), {"method": "Fresh", "authors": "a"})
    assert outcome.status == "accepted", outcome.message
    after = board.pairwise()
    assert after is not None and len(after["keys"]) == 2
    assert any(key.endswith("/fresh") for key in after["keys"])
    assert board.store.board(PAIRWISE_KEY)[1] == board.store.version()
    # an older state's matrix in the cache (a background refresh not done yet) is never shown
    board.store.save_board(PAIRWISE_KEY, before, board.store.version() - 1)
    assert board.pairwise() is None
    assert 'id="much-pairwise-pending"' in render_pairwise(board.pairwise(), board.store.rows())
    board.store.save_board(PAIRWISE_KEY, before, board.store.version())  # same count, other rows: refused too
    assert board.pairwise() is None
    board.refresh_ranking()
    assert board.pairwise() == after


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_the_tab_holds_the_matrix_the_figure_and_the_rows_without_cost(board):
    outcome = board.submit(valid_archive(sample_signal(seed=4), name="nocost"),
                           {"method": "No <b>cost</b>", "authors": "b"})
    assert outcome.status == "accepted", outcome.message
    payload, rows = board.pairwise(), board.store.rows()
    page = render_pairwise(payload, rows)
    parser = _Tags()
    parser.feed(page)
    n = len(payload["keys"])
    cells = [a for tag, a in parser.tags if tag == "td" and "data-i" in a]
    assert len(cells) == n * n
    for attrs in cells:
        i, j = int(attrs["data-i"]), int(attrs["data-j"])
        cell = payload["cells"][i][j]
        expected = "self" if cell is None else ("better" if cell["difference"] > 0 else "worse") \
            if cell["separable"] else "tied"
        assert attrs["class"] == expected
    assert "Holm" in page and f"below {LEVEL}" in page
    assert "No &lt;b&gt;cost&lt;/b&gt;" in page and "<b>cost</b>" not in page  # escaped
    # the figure: one point per row with a cost, every built-in baseline measured; the upload without cost listed
    assert page.count('<g class="point') == len(BUILTINS)
    assert re.search(r'id="much-no-cost">[^<]*No &lt;b&gt;cost&lt;/b&gt; / nocost', page)
    svg = page[page.index("<svg"):page.index("</svg>") + 6]
    assert "<script" not in svg and "http://" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
    best = sum(payload["best_group"][k] for k, key in enumerate(payload["keys"]) if not key.endswith("/nocost"))
    assert svg.count('class="point best"') == best


def test_figure_labels_keep_their_gap_and_the_axes_have_ticks():
    """The label column: every label at least a line apart, inside the plot's height, in the order of the points;
    and a log axis with at least two labelled decades even when every cost lies within one."""
    from much_leaderboard._pairwise_html import _spread, cost_figure

    rng = np.random.default_rng(2)
    for n in (1, 5, 12, 20):
        wanted = rng.uniform(20, 330, n).tolist()
        wanted[: n // 2] = [100.0] * (n // 2)  # many points at one height
        placed = _spread(wanted, 14.0, 32.0, 336.0)
        ordered = sorted(placed)
        assert all(b - a >= 14.0 - 1e-9 for a, b in zip(ordered, ordered[1:], strict=False))
        assert min(placed) >= 32.0 - 1e-9 and max(placed) <= 336.0 + 1e-9
        assert [k for k in np.argsort(wanted, kind="stable")] == [k for k in np.argsort(placed, kind="stable")]
    points = [{"label": f"#{k} row", "cost": 2e-6 * (1 + k / 10), "value": 0.6 + k / 100, "interval": [0.58, 0.66],
               "best": k < 2, "declared": k == 3} for k in range(4)]
    svg = cost_figure(points)
    assert len(re.findall(r'class="tick"[^>]*text-anchor="middle"', svg)) >= 2
    assert svg.count('class="point best"') == 2 and svg.count('fill="#fff"') == 1


def test_the_json_answer_carries_the_matrix_the_tab_shows(board):
    """``GET /api/boards``: ``pairwise`` is the cached matrix (JSON types), null while a newer one is computed."""
    pytest.importorskip("gradio")
    from fastapi.testclient import TestClient

    from much_leaderboard import create_server

    client = TestClient(create_server(board))
    served = client.get("/api/boards").json()
    assert served["pairwise"] == board.pairwise() and len(served["pairwise"]["keys"]) == len(board.store.rows()) >= 3
    assert [row["key"] for row in served["public"]][:1] == served["pairwise"]["keys"][:1]  # both rank by ROC-AUC
    cached, version = board.store.board(PAIRWISE_KEY)
    board.store.save_board(PAIRWISE_KEY, cached, version - 1)  # an older state's matrix: not served
    try:
        assert client.get("/api/boards").json()["pairwise"] is None
    finally:
        board.store.save_board(PAIRWISE_KEY, cached, version)
