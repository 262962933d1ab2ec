"""The sampling and reference detector families on the embedded sample: ROC-AUC and PR-AUC with 95 % bootstrap
intervals, the paired bootstrap p-value against Token Likelihood on the same claims, seconds per claim, and ROC-AUC
against the number of samples N (the semantic isotropy seed's figure 5b on MUCH); the encoder and NLI model printed
with every number. Output: benchmarks/sampling_detectors.txt (and --json).

    python benchmarks/bench_sampling_detectors.py [--samples sample|PACK] [--encoder minilm] [--nli-model NAME]
        [--internals PACK] [--probe DIR] [--bootstrap 1000] [--rows N] [--out benchmarks/...txt] [--json FILE]

``--samples sample`` (the default) opens the embedded sample's own samples pack (``much_dataset.load_samples``: 8
answers per row by the sample's observer, SmolLM2-135M-Instruct); ``--samples PACK`` any samples pack of
``python -m builder samples`` drawn for the sample's rows (only the rows it covers are scored, and the table says how
many). Methods beside the new ones: Token Likelihood and KTC always; CCP (ccp_10_8) and the NLI detectors only with
``--nli-model`` (no NLI model installs offline: microsoft/deberta-large-mnli needs the hub); RAUQ with
``--internals PACK`` (an internals pack of the sample, ``python benchmarks/bench_internals.py build``); the hidden-state
probe with ``--probe DIR`` (a detector folder of ``much train``, scored on the rows it was not trained on).
``--rows N`` scores the first N covered rows only (a quick check of the script, not a table to publish).

The sampling detectors are claim-level (one value per claim, ``<name>@claim``): the table scores their claim values
as they are, and their p-value against Token Likelihood is the paired bootstrap of the two methods' claim scores on
the same claims (Token Likelihood's under the product aggregator).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The new detectors that need only the samples (and the encoder).
SAMPLING = ("semantic_isotropy", "semantic_isotropy_samples", "semantic_isotropy_frobenius", "semantic_isotropy_logdet",
            "claim_isotropy", "eigenscore", "sample_cosine", "sample_rouge1", "sample_rougel", "sample_entities")
#: ... and those that also need an NLI model.
SAMPLING_NLI = ("sample_nli_ent", "sample_nli_con", "sample_nli_diff", "sample_nli_unv", "sample_luq",
                "sample_graph_degree")
#: Detectors of the N curve.
CURVE = ("semantic_isotropy", "semantic_isotropy_samples", "sample_cosine", "sample_rouge1")


def _samples(value: str):
    import much_dataset

    return value, much_dataset.load_samples(value)


def table(args: argparse.Namespace) -> None:
    import numpy as np

    import much_dataset
    from much_dataset import schema
    from much_metric.baselines.encoders import load_encoder
    from much_metric.baselines.samples import open_samples
    from much_metric.benchmark import EvaluationOptions, NliOptions, ResourceOptions, run_benchmark
    from much_metric.scoring import Bootstrap, compare, paired_bootstrap

    started = time.perf_counter()
    data = much_dataset.load("sample", split="test")
    label, pack = _samples(args.samples)
    samples = open_samples(pack)
    covered = [i for i, gid in enumerate(data[schema.GENERATION_ID]) if gid in samples.texts]
    split = data.select(covered[: args.rows] if args.rows else covered)
    encoder = load_encoder(args.encoder)
    nli_name = args.nli_model or "none (no NLI model installs offline)"
    signals = ["token_likelihood", "ktc", *SAMPLING]
    if args.nli_model:
        signals += ["ccp_10_8", *SAMPLING_NLI]
    if args.internals:
        signals.append("rauq")
    if args.probe:
        signals.append(f"learned:{args.probe}")
    bootstrap = Bootstrap(n_resamples=args.bootstrap, random_state=0)
    result = run_benchmark(split, signals=signals, evaluation=EvaluationOptions(bootstrap=bootstrap),
                           nli=NliOptions(model=args.nli_model, enabled=bool(args.nli_model)),
                           resources=ResourceOptions(tokenizer="smollm2", samples=samples, encoder=encoder,
                                                     internals=args.internals))
    chunks, labels, mask = split[schema.TOKEN_CHUNKS], split[schema.LABELS], split[schema.STOPWORD_MASK]
    by_name = {run.spec.signal: run for run in result.signals.values()}
    reference = [by_name["token_likelihood"].values[g] for g in split[schema.GENERATION_ID]]
    n_claims = result.rows[0].score.n_claims
    lines = [f"Sampling and reference detectors on the embedded sample: {len(split)} of {len(data)} rows "
             f"({n_claims:,} claims, {result.rows[0].score.n_hallucinated:,} hallucinated); samples: "
             f"{samples.describe()} [{label}]; encoder: {encoder.name}; NLI model: {nli_name}; product aggregator, "
             f"stopwords null (the claim-level rows, @claim, scored as they are); {args.bootstrap} bootstrap "
             "resamples of the rows (95 % intervals); p = paired bootstrap p-value of ROC-AUC against Token "
             "Likelihood on the same claims.",
             f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start "
             "(shared: read times as orders of magnitude)", "",
             "| method | signal | ROC-AUC | PR-AUC | p vs TL | s/claim | encoder | NLI |",
             "|---|---|---|---|---|---|---|---|"]
    records = []
    scored = {r.signal_name: r for r in result.table.results}
    baseline = scored[by_name["token_likelihood"].name]
    claim_sample = np.unique(baseline.claim_rows, return_inverse=True)[1]
    for row in result.rows:
        run = result.signals[row.signal_name]
        needs = set(run.spec.needs)
        paired = None
        if run.spec.baseline.level == "claim":  # its claim values against Token Likelihood's claim scores
            paired = paired_bootstrap(scored[row.signal_name].claim_scores, baseline.claim_scores,
                                      baseline.hallucinated, claim_sample, len(split),
                                      n_resamples=args.bootstrap, random_state=0)
        elif run.spec.signal != "token_likelihood":
            values = [run.values[g] for g in split[schema.GENERATION_ID]]
            paired = compare(values, reference, chunks, labels, mask, aggregation="product", bootstrap=bootstrap)
        roc, pr = row.score.roc_auc, row.score.pr_auc
        roc_i, pr_i = row.score.intervals["roc_auc"], row.score.intervals["pr_auc"]
        record = {"signal": row.signal_name, "method": row.method, "roc_auc": roc, "roc_auc_interval": list(roc_i),
                  "pr_auc": pr, "pr_auc_interval": list(pr_i),
                  "p_vs_token_likelihood": None if paired is None else paired["roc_auc"]["p_value"],
                  "seconds_per_claim": row.uq_seconds / n_claims,
                  "encoder": encoder.name if "encoder" in needs else "", "nli": nli_name if "nli" in needs else ""}
        records.append(record)
        p = "" if paired is None else f"{paired['roc_auc']['p_value']:.3f}"
        lines.append(f"| {row.method} | `{row.signal_name}` | {roc:.3f} [{roc_i[0]:.3f}, {roc_i[1]:.3f}] | "
                     f"{pr:.3f} [{pr_i[0]:.3f}, {pr_i[1]:.3f}] | {p} | {record['seconds_per_claim']:.2g} | "
                     f"{record['encoder']} | {record['nli']} |")
    for row in result.floors:
        lines.append(f"| {row.method} | | {row.score.roc_auc:.3f} | {row.score.pr_auc:.3f} | | | | |")
    lines += ["", "Notes:", *[f"- {note.message}" for note in result.notes], ""]

    # ROC-AUC against N (figure 5b of the seed): the same rows, the first n samples of each
    n_max = int(samples.counts().min())
    curve = {}
    lines.append(f"ROC-AUC against the number of samples N (first N of each row's {n_max}; encoder: {encoder.name}):")
    lines.append("| N | " + " | ".join(CURVE) + " |")
    lines.append("|---|" + "---|" * len(CURVE))
    for n in range(2, n_max + 1):
        part = run_benchmark(split, signals=list(CURVE), evaluation=EvaluationOptions(bootstrap=bootstrap),
                             nli=NliOptions(enabled=False),
                             resources=ResourceOptions(tokenizer="smollm2", samples=samples.first(n),
                                                       encoder=encoder))
        cells = {r.signal_name.removesuffix("@claim"): r.score for r in part.rows}  # by name as asked
        curve[n] = {name: [s.roc_auc, *s.intervals["roc_auc"]] for name, s in cells.items()}
        lines.append(f"| {n} | " + " | ".join(f"{cells[c].roc_auc:.3f} [{cells[c].intervals['roc_auc'][0]:.3f}, "
                                               f"{cells[c].intervals['roc_auc'][1]:.3f}]" for c in CURVE) + " |")
    lines.append(f"\nwall {time.perf_counter() - started:.0f} s")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": records, "curve": curve, "n_rows": len(split),
                                               "samples": samples.record(), "encoder": encoder.name,
                                               "nli": nli_name}, indent=2), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", default="sample", help="'sample' (its samples pack) or a samples pack folder")
    parser.add_argument("--encoder", default=None, help="much run --encoder (default: minilm when installed)")
    parser.add_argument("--nli-model", default=None, help="NLI model for CCP and the NLI detectors (hub id / folder)")
    parser.add_argument("--internals", default=None, help="internals pack of the sample (adds RAUQ)")
    parser.add_argument("--probe", default=None, help="a much train detector folder (adds the hidden-state probe)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=None, help="score the first N covered rows only (a quick check)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "sampling_detectors.txt"))
    parser.add_argument("--json", default=None)
    table(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
