"""Benchmark of the leaderboard server: re-scoring a MUCH-sized submission and rendering the main page.

On synthetic data shaped like MUCH (much_dataset.synthetic, 4,873 samples, NOT MUCH data), in one run:

1. **re-scoring a submission**: a zip with one signal (one value per token for every sample, JSONL and parquet)
   goes through what the server does before answering the submitter --
   :func:`much_metric.signals.read_archive` (every safety check, the toolkit's reader) and
   :func:`much_leaderboard.score_submission` with ``breakdown_intervals=False`` (every metric of
   ``METRIC_TABLE`` with 1,000 bootstrap resamples on the whole data; point values per language, generating model
   and manual/auto selection) -- and the ratio to the 5 s target; then the background phase
   (:func:`much_leaderboard.score_breakdowns`: the breakdowns' intervals), everything in one call
   (``breakdown_intervals=True``), and the toolkit's plain ``evaluate_signals`` on the same signal (what ``much
   evaluate`` computes, no breakdown);
   then P(rank) over 2 and 10 such rows (the background ranking, :func:`much_leaderboard.rank_rows`);
2. **the main page**: a store holding 200 rows (copies of the scored row under 200 archive ids), timed from the
   store read to the HTML string the app sends (store rows + cached ranking -> ``table_rows`` -> ``render_table``),
   for the overall view and a language filter, and the ratio to the 1 s target.

3. **the pairwise tab** (issue #57), on the embedded sample board (its four built-in baselines, 1,000 resamples):
   the page with and without the pairwise matrix and cost figure (store read -> HTML, from the cached matrix) in one
   run, their ratio and sizes, and the matrix's own computation (once per board state, in the ranking refresh) next
   to P(rank)'s. ``--pairwise-only`` runs this part alone (``--out benchmarks/leaderboard_pairwise.txt``).

Usage: ``python benchmarks/bench_leaderboard.py [--repeats 3] [--out benchmarks/leaderboard.txt]``. Timings are the
minimum over repeats.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N_SAMPLES = 4873
N_ROWS = 200
TARGET_SCORE_S = 5.0
TARGET_PAGE_S = 1.0


def best_of(function, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def synthetic_data():
    import datasets

    from much_dataset.schema import MUCH_CONFIGS
    from much_dataset.synthetic import make_rows
    from much_leaderboard import EvaluationData

    rows = make_rows(N_SAMPLES, seed=0)
    langs = ("en", "fr", "es", "de")
    configs = list(MUCH_CONFIGS)  # MUCH's generation configs: the per-model breakdown has MUCH's models
    for index, row in enumerate(rows):
        row["lang"] = langs[index % 4]
        row["generation_config"] = configs[index % len(configs)]
        # as MUCH: 200 samples with both annotators' labels (manual selection), the others without (auto)
        human = list(row["labels"]) if index < 200 else [0]
        row["human_labels_0"], row["human_labels_1"] = human, list(human)
    dataset = datasets.Dataset.from_list(rows)
    return EvaluationData("synthetic", n_resamples=1000, dataset=dataset, generation_seconds=2758.0), rows


def submission_zip(rows, kind: str) -> bytes:
    from much_metric.signals import write_signals

    records = [{"generation_id": r["generation_id"], "signal_name": "bench_method",
                "values": 1.0 - np.asarray([v[0] for v in r["logits_values"]], dtype=np.float64)} for r in rows]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"bench_method.{kind}"
        write_signals(path, records)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(path, path.name)
            archive.writestr("timings.json", json.dumps({"bench_method": {"seconds": 12.5}}))
        return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    parser.add_argument("--pairwise-only", action="store_true", help="only part 3 (the pairwise tab)")
    args = parser.parse_args()
    if args.pairwise_only:
        lines = pairwise_tab(args.repeats)
        out = Path(args.out or "benchmarks/leaderboard_pairwise.txt")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return
    args.out = args.out or "benchmarks/leaderboard.txt"

    from much_leaderboard import Store, rank_rows, render_table, score_breakdowns, score_submission, table_rows
    from much_metric.report import EvaluationOptions, evaluate_signals
    from much_metric.scoring import Bootstrap
    from much_metric.signals import read_archive

    data, rows = synthetic_data()
    lines = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    n_tokens = sum(len(r["output_tokens"]) for r in rows)
    say(f"input: {N_SAMPLES} samples, {n_tokens} tokens (synthetic, MUCH-sized; NOT MUCH data), "
        f"{len(data.langs)} languages, {len(data.models)} generating models, selections {data.selections}; "
        f"{os.cpu_count()} CPU cores visible, "
        f"load average {os.getloadavg()[0]:.1f} at start")
    scored = None
    for kind in ("parquet", "jsonl"):
        archive = submission_zip(rows, kind)
        read_s, parsed = best_of(lambda a=archive: read_archive(a), args.repeats)
        score_s, scored = best_of(lambda p=parsed: score_submission(p, data, breakdown_intervals=False), args.repeats)
        total = read_s + score_s
        say(f"re-score before answering ({kind}, {len(archive) / 2**20:.1f} MiB zip): validate+read {read_s:6.2f} s "
            f"+ score {score_s:6.2f} s = {total:6.2f} s   (target < {TARGET_SCORE_S:.0f} s: "
            f"{total / TARGET_SCORE_S:.2f} x the target)")
    background_s, _ = best_of(lambda: score_breakdowns(parsed, data), args.repeats)
    say(f"background phase (breakdown intervals, 1000 resamples each): {background_s:6.2f} s")
    full_s, scored = best_of(lambda: score_submission(parsed, data), args.repeats)
    say(f"everything in one call (breakdown_intervals=True): {full_s:6.2f} s")
    plain_s, _ = best_of(lambda: evaluate_signals(data.dataset, parsed.signals, evaluation=EvaluationOptions(
                                                  bootstrap=Bootstrap(n_resamples=1000), floors=False)),
                         args.repeats)
    say(f"toolkit evaluate_signals alone (1000 resamples, no breakdown): {plain_s:6.2f} s   (answer-time score / "
        f"this = {score_s / plain_s:.2f} x)")
    arrays = scored[1]["bench_method"]
    rng = np.random.default_rng(0)
    for n_rows in (2, 10):
        keys = [f"row{k}" for k in range(n_rows)]
        copies = [{**arrays, "claim_scores": arrays["claim_scores"] + rng.normal(0, 0.05, arrays["claim_scores"].size)}
                  for _ in keys]
        rank_s, _ = best_of(lambda k=keys, c=copies: rank_rows(k, c, data), 1)
        say(f"P(rank) over {n_rows} rows (1000 resamples, background thread): {rank_s:6.2f} s")
    metrics = scored[0]["bench_method"]
    n_claims = metrics["overall"]["n_claims"]
    say(f"claims scored: {n_claims}; metrics with intervals: {len(metrics['overall']['intervals'])} overall, "
        f"{sum(len(v) for v in metrics['by'].values())} breakdown groups")

    with tempfile.TemporaryDirectory() as folder:
        store = Store(folder)
        ranking = {}
        for k in range(N_ROWS):
            fake = f"archive {k}".encode()
            submission, _ = store.add_pending(fake, {"method": f"method <{k}>", "authors": "a", "link": "",
                                                     "needs": ["sampling"]})
            store.accept(submission, {"bench_method": metrics}, {})  # the scored row, no claim arrays needed
            ranking[f"{submission}/bench_method"] = {"rank": k + 1, "rank_probability": 0.5, "lang_gap": 0.01}
        store.save_board("roc_auc", ranking, store.version())

        def page(subset: str) -> str:
            cached = store.board("roc_auc")[0]
            found = table_rows(store.rows(), cached, subset=subset, sort="roc_auc")
            return render_table(found, langs=("de", "en", "es", "fr"))

        for subset in ("all", "lang=fr"):
            page_s, html_page = best_of(lambda s=subset: page(s), args.repeats)
            assert html_page.count("<tr data-key=") == N_ROWS
            say(f"main page, {N_ROWS} rows, subset={subset}: {1000 * page_s:7.1f} ms server time, "
                f"{len(html_page) / 1024:.0f} KiB HTML   (target < {TARGET_PAGE_S:.0f} s: "
                f"{page_s / TARGET_PAGE_S:.3f} x the target)")
    lines.extend(pairwise_tab(args.repeats))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


def pairwise_tab(repeats: int) -> list[str]:
    """Part 3: the sample board's page with and without the pairwise tab, and the matrix's computation."""
    from much_leaderboard import EvaluationData, Leaderboard, rank_rows, render_table, table_rows

    lines = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        board = Leaderboard(folder, data=EvaluationData(n_resamples=1000))
        board.add_baselines()
        rows = board.store.rows()

        def table() -> str:  # what the app sends for the board tab (_app._board_html without its CSS)
            return render_table(table_rows(board.store.rows(), board.ranking()), langs=board.data.langs)

        def with_matrix() -> str:  # and the pairwise tab's HTML (the app sends it on load and on refresh)
            return table() + board.pairwise_html()

        plain_s, both_s = float("inf"), float("inf")
        for _ in range(3):  # interleaved, so that a change of the machine's load reaches both
            seconds, plain = best_of(table, repeats)
            plain_s = min(plain_s, seconds)
            seconds, both = best_of(with_matrix, repeats)
            both_s = min(both_s, seconds)
        assert 'id="much-cost-figure"' in both
        say(f"pairwise tab, sample board ({len(rows)} rows, 1000 resamples; {os.cpu_count()} CPU cores, load average "
            f"{load:.1f} at start): page without the matrix {1000 * plain_s:.1f} ms ({len(plain) / 1024:.0f} KiB), "
            f"with the matrix and cost figure {1000 * both_s:.1f} ms ({len(both) / 1024:.0f} KiB): "
            f"{both_s / plain_s:.2f} x")
        keys = [f"{r['submission']}/{r['signal']}" for r in rows]
        arrays = [board.store.scores(r["submission"], r["signal"]) for r in rows]
        rank_s, _ = best_of(lambda: rank_rows(keys, arrays, board.data), 1)

        def refresh() -> None:  # both cache entries stale: P(rank) and the matrix recomputed, as after a submission
            for entry in ("roc_auc", "pairwise:roc_auc"):
                board.store.save_board(entry, {}, -1)
            board.refresh_ranking()

        refresh_s, _ = best_of(refresh, 1)
        assert board.pairwise() is not None
        say(f"computed once per board state (background refresh): P(rank) alone {rank_s:.2f} s, P(rank) + pairwise "
            f"matrix {refresh_s:.2f} s ({refresh_s / rank_s:.2f} x)")
    return lines


if __name__ == "__main__":
    main()
