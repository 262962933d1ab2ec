"""Validity of the conformal claim filters, measured on the embedded sample (much_metric.conformal).

The signal is Token Entropy-24 (product aggregator, stopwords nulled: the metric's claim scores), computed once.
For each guarantee (answer level, claim level), each calibration (pooled; per language) and each alpha in
{0.05, 0.1, 0.2}, over ``--splits`` seeded half/half calibration/test splits by answer (and, for the pooled
calibrations, by Wikipedia article): the realised violation rate with its 95 % Wilson interval, overall and per
language (one Bernoulli event per split, see much_metric.conformal._validity), and the mean realised quantity; then
the claims kept at each alpha. A cell is "above" when alpha lies below its interval (a violation beyond sampling
error), "ok" otherwise; per-language rows of a pooled calibration are marked "(not promised)".

Usage: ``python benchmarks/bench_conformal.py [--splits 300] [--out benchmarks/conformal.txt]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import much_dataset  # noqa: E402
from much_metric.baselines import token_entropy  # noqa: E402
from much_metric.conformal import (  # noqa: E402
    ALPHAS,
    Splits,
    claims_from_token_scores,
    claims_kept,
    violation_rates,
)
from much_metric.learned.splits import article_title  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=300)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "conformal.txt"),
                        help="also write the tables here (default benchmarks/conformal.txt)")
    args = parser.parse_args()
    started = time.perf_counter()
    sample = much_dataset.load("sample", split="test")
    claims = claims_from_token_scores(token_entropy(sample), sample, groups=["lang"])
    articles = np.repeat(np.asarray([article_title(u) for u in sample["wiki_url"]], dtype=object),
                         [int((claims.answer == g).sum()) for g in sample["generation_id"]])
    claims = type(claims)(claim_scores=claims.claim_scores, answer=claims.answer, hallucinated=claims.hallucinated,
                          groups={**claims.groups, "article": articles})
    lines = [f"Embedded sample: {len(sample)} answers, {len(claims)} claims ({claims.hallucinated.mean():.1%} "
             f"hallucinated), {len(set(articles) - {''})} Wikipedia articles; signal Token Entropy-24 (product, "
             f"stopwords nulled); {args.splits} seeded half/half splits per row.", "",
             "| guarantee | calibration | split by | alpha | group | events / trials | violation rate [95 % Wilson] "
             "| mean realised | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    runs = [("answer", None, "answer"), ("answer", "lang", "answer"), ("claim", None, "answer"),
            ("claim", "lang", "answer"), ("answer", None, "article"), ("claim", None, "article")]
    above = 0
    for guarantee, by, unit in runs:
        cells = violation_rates(claims, guarantee=guarantee, alphas=ALPHAS, by=by,
                                splits=Splits(n_splits=args.splits, unit=unit, random_state=0))
        for cell in sorted(cells, key=lambda c: (c.alpha, c.group != "", c.group)):
            promised = (cell.group == "") == (by is None) or (cell.group == "" and guarantee == "answer")
            low, high = cell.interval
            verdict = ("above" if cell.exceeds() else "ok") + ("" if promised else " (not promised)")
            above += promised and cell.exceeds()
            lines.append(f"| {guarantee} | {'per ' + by if by else 'pooled'} | {unit} | {cell.alpha:g} | "
                         f"{cell.group or 'all'} | {cell.events} / {cell.trials} | {cell.rate:.3f} [{low:.3f}, "
                         f"{high:.3f}] | {cell.mean_realised:.3f} | {verdict} |")
    lines += ["", f"promised cells above alpha beyond sampling error: {above}", "",
              "Claims kept (mean over the splits by answer; correct kept = share of the correct claims kept):", "",
              "| guarantee | alpha | kept | correct kept |", "|---|---|---|---|"]
    for guarantee in ("answer", "claim"):
        kept = claims_kept({"token_entropy_24": claims}, guarantee=guarantee,
                           splits=Splits(n_splits=min(args.splits, 100), random_state=0))
        for alpha in ALPHAS:
            s = kept.summary("token_entropy_24", alpha)
            lines.append(f"| {guarantee} | {alpha:g} | {s['kept']:.3f} [{s['kept_interval'][0]:.3f}, "
                         f"{s['kept_interval'][1]:.3f}] | {s['correct_kept']:.3f} |")
    lines += ["", f"total {time.perf_counter() - started:.0f} s"]
    text = "\n".join(lines)
    print(text)
    if args.out:  # run_benchmarks.sh runs this script as a "self" benchmark: it writes its own output file
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
