"""Learned detectors: the embedded sample's leave-one-language-out table, and speed on a MUCH-sized split.

1. **Table** (protocol ``leave-one-language-out`` on the embedded sample, 606 Mu-SHROOM test rows, labels =
   ``labels``): for each held-out language, the linear and the sequence detector are trained on the other three
   (early stopping on a validation part drawn by question), then scored on the held-out language. Each sample is
   held out exactly once, so the held-out scores of the four folds cover the sample; they are compared with every
   unsupervised probability baseline (the registry's ``all-probability`` group, which needs no model) on the same
   claims: per fold, and pooled over the folds with a paired bootstrap (1,000 resamples of the samples,
   :func:`much_metric.scoring.compare`: difference, 95 % interval, p-value) against the best baseline -- chosen on
   the held-out claims themselves, which favours the baseline. The pooled scores are also written as signal files
   and ranked by ``much evaluate --rank roc_auc``. As an obvious alternative, scikit-learn's token-level logistic
   regression on the same features with each claim's label copied to its tokens (Quevedo et al. 2024 train on
   token labels; MUCH has claim labels only) is scored too.
2. **Speed** on a MUCH-sized synthetic split (4,673 train samples, ~24.5 tokens each, as MUCH's auto split; NOT MUCH
   data): linear training wall time (features included; target < 30 s on 2 cores) against scikit-learn's
   token-level logistic regression on the same features; linear inference (target < 0.5 s) against Max Likelihood;
   the sequence detector's time per epoch and in total.
3. **Monitor**: ``benchmarks/bench_monitor.py --method learned:<sequence detector>`` (live SmolLM2 generation on CPU):
   the share of generation time the detector adds (target <= 2 %); ``--no-monitor`` skips it.

    python benchmarks/bench_learned.py [--threads 1] [--no-monitor] [--out benchmarks/learned.txt]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

LINES: list[str] = []


def say(text: str = "") -> None:
    print(text, flush=True)
    LINES.append(text)


def _columns(dataset):
    masks = dataset["stopword_mask"] if "stopword_mask" in dataset.column_names else None
    return dataset["token_chunks"], dataset["labels"], masks


def _auc(scores, dataset) -> dict:
    from much_metric.scoring import score

    chunks, labels, masks = _columns(dataset)
    return score(scores, chunks, labels, masks).to_dict()


def _token_label_logistic(train, test):
    """scikit-learn logistic regression on token features, each token labelled with its claim's label."""
    from sklearn.linear_model import LogisticRegression

    from much_metric.baselines import token_arrays
    from much_metric.learned import token_features

    x = token_features(train)
    y = np.zeros(len(x), dtype=int)
    offsets = token_arrays(train).offsets
    for index, (chunks, labels) in enumerate(zip(train["token_chunks"], train["labels"], strict=True)):
        for chunk, label in zip(chunks, labels, strict=True):
            y[offsets[index] + np.asarray(chunk)] = int(label == -1)
    mean, std = x.mean(0), np.where(x.std(0) > 1e-8, x.std(0), 1.0)
    model = LogisticRegression(max_iter=2000).fit((x - mean) / std, y)
    return model.predict_proba((token_features(test) - mean) / std)[:, 1]


def table(workdir: Path, report: str | None = None) -> Path:
    from much_dataset import load
    from much_metric.baselines import resolve, token_arrays
    from much_metric.baselines.registry import expand_signals
    from much_metric.learned import KINDS, make_folds, row_info
    from much_metric.learned.estimators import ESTIMATORS
    from much_metric.scoring import Bootstrap, compare
    from much_metric.signals import write_signals

    dataset = load("sample", split="test")
    arrays = token_arrays(dataset)
    flat = {name: resolve(name).compute(arrays, {}, {}) for name in expand_signals(["all-probability"])}
    # The product aggregator multiplies 1 - s: a baseline whose scores leave [0, 1] (nll) is not scored with it.
    outside = [name for name, values in flat.items() if (values < 0).any() or (values > 1).any()]
    baselines = {name: arrays.split(values) for name, values in flat.items() if name not in outside}
    folds = make_folds(row_info(dataset), "leave-one-language-out")
    methods = ("linear", "sequence", "sklearn-token-lr")
    held_out = {m: [None] * len(dataset) for m in methods}
    say("== 1. Protocol leave-one-language-out on the embedded sample (606 Mu-SHROOM test rows, labels = 'labels', "
        "product aggregator, stopwords null) ==")
    say("Baselines: the 'all-probability' group: " + ", ".join(baselines) + f" (left out, scores outside [0, 1] for "
        f"the product aggregator: {', '.join(outside) or 'none'})")
    say()
    rows = []
    for fold in folds:
        say(fold.describe())
        train, validation, test = (dataset.select(fold.train), dataset.select(fold.validation),
                                   dataset.select(fold.test))
        found = {}
        for kind in KINDS:
            start = time.perf_counter()
            folder = workdir / f"{kind}-{fold.name.split('=')[1]}"
            model = ESTIMATORS[kind]().fit(train, validation, checkpoint=folder / "checkpoint", progress=False,
                                           protocol={"name": fold.protocol, "fold": fold.name, "data": "sample",
                                                     "purged": dict(fold.purged)})
            model.save(folder)
            detector = model.detector_
            found[kind] = token_arrays(test).split(detector.token_scores(test))
            training = detector.config["training"]
            validation_auc = detector.config["validation"]["roc_auc"]
            say(f"  {kind}: {training['epochs']} epochs (best {training['best_epoch']}), "
                f"{time.perf_counter() - start:.1f} s, validation ROC-AUC {validation_auc:.3f}")
        test_arrays = token_arrays(test)
        found["sklearn-token-lr"] = test_arrays.split(_token_label_logistic(train, test))
        for method, values in found.items():
            for row, value in zip(fold.test, values, strict=True):
                held_out[method][row] = value
        scores = {m: _auc(v, test) for m, v in found.items()}
        scores.update({b: _auc([v[i] for i in fold.test], test) for b, v in baselines.items()})
        best = max(baselines, key=lambda b: scores[b]["roc_auc"])
        chunks, labels, masks = _columns(test)
        tests = {m: compare(found[m], [baselines[best][i] for i in fold.test], chunks, labels, stopword_mask=masks,
                            bootstrap=Bootstrap(n_resamples=1000, random_state=0)) for m in ("linear", "sequence")}
        rows.append((fold.name, scores[best]["n_claims"], best, scores, tests))
    say()
    say("Per held-out language: ROC-AUC / PR-AUC; best baseline = the best probability baseline on these claims; "
        "difference to it with 95% paired-bootstrap interval and p-value (1,000 resamples of the samples)")
    header = f"{'held out':<9} {'claims':>6} {'linear':>13} {'sequence':>13} {'sk token-LR':>13} {'best baseline':>33}"
    say(header)
    for name, n_claims, best, scores, _ in rows:
        cells = [f"{scores[m]['roc_auc']:.3f}/{scores[m]['pr_auc']:.3f}" for m in methods]
        say(f"{name:<9} {n_claims:>6} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} "
            f"{best + ' ' + format(scores[best]['roc_auc'], '.3f') + '/' + format(scores[best]['pr_auc'], '.3f'):>33}")
    for name, _, best, _, tests in rows:
        for method, result in tests.items():
            roc = result["roc_auc"]
            say(f"  {name} {method} - {best}: ROC-AUC {roc['difference']:+.3f} [{roc['interval'][0]:+.3f}, "
                f"{roc['interval'][1]:+.3f}] p={roc['p_value']:.3f}")
    for method in ("linear", "sequence"):
        differences = [tests[method]["roc_auc"]["difference"] for _, _, _, _, tests in rows]
        wins = sum(tests[method]["roc_auc"]["interval"][0] > 0 for _, _, _, _, tests in rows)
        losses = sum(tests[method]["roc_auc"]["interval"][1] < 0 for _, _, _, _, tests in rows)
        say(f"  {method}: mean ROC-AUC difference to the fold's best baseline {np.mean(differences):+.3f}; 95% "
            f"interval above 0 in {wins} of {len(rows)} folds, below 0 in {losses}")
    say()
    say("Score level per held-out language (mean claim score, product aggregator) against its hallucinated share:")
    from much_metric.scoring import aggregate_claims

    for fold in folds:
        part = dataset.select(fold.test)
        chunks, labels, masks = _columns(part)
        share = np.mean([label == -1 for row in labels for label in row[:-1]])
        levels = {m: np.mean(np.concatenate(aggregate_claims([held_out[m][i] for i in fold.test], chunks, masks)))
                  for m in ("linear", "sequence")}
        levels["max_likelihood"] = np.mean(np.concatenate(aggregate_claims([baselines["max_likelihood"][i]
                                                                            for i in fold.test], chunks, masks)))
        say(f"  {fold.name}: hallucinated {share:.3f}; " + ", ".join(f"{m} {v:.3f}" for m, v in levels.items()))
    say()
    # Pooled over the folds: every sample once, scored by the detector that did not see its language.
    say("Pooled: the four folds' held-out scores concatenated. Each fold has its own detector, whose score level on an "
        "unseen language is not calibrated against the other folds' detectors, while a baseline is one function "
        "everywhere: the pooled ranking mixes four score scales (the per-fold comparison above is the paired one).")
    pooled = {m: _auc(held_out[m], dataset) for m in methods}
    pooled.update({b: _auc(v, dataset) for b, v in baselines.items()})
    best = max(baselines, key=lambda b: pooled[b]["roc_auc"])
    chunks, labels, masks = _columns(dataset)
    say(f"Pooled over the 4 folds ({pooled[best]['n_claims']} claims, {pooled[best]['n_hallucinated']} hallucinated); "
        f"best baseline: {best}")
    for method in (*methods, *baselines):
        say(f"  {method:<24} ROC-AUC {pooled[method]['roc_auc']:.3f}  PR-AUC {pooled[method]['pr_auc']:.3f}")
    for method in methods:
        result = compare(held_out[method], baselines[best], chunks, labels, stopword_mask=masks,
                         bootstrap=Bootstrap(n_resamples=1000, random_state=0))
        for key in ("roc_auc", "pr_auc"):
            r = result[key]
            say(f"  {method} - {best} {key}: {r['difference']:+.3f} [{r['interval'][0]:+.3f}, {r['interval'][1]:+.3f}] "
                f"p={r['p_value']:.3f}")
    signals = workdir / "signals"
    ids = dataset["generation_id"]
    for name, values in {**{f"learned_{m}_lolo": held_out[m] for m in methods}, **baselines}.items():
        write_signals(signals / f"{name}.parquet", [{"generation_id": g, "signal_name": name, "values": v}
                                                   for g, v in zip(ids, values, strict=True)])
    say()
    say("much evaluate --source sample --scores <held-out signals> --rank roc_auc --bootstrap 1000 "
        "(learned_*_lolo = leave-one-language-out held-out scores):")
    from much_metric.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["evaluate", "--source", "sample", "--scores", str(signals), "--rank", "roc_auc",
                     "--bootstrap", "1000", *(["--report", report] if report else [])])
    for line in buffer.getvalue().splitlines():
        say("  " + line)
    say(f"  (exit code {code})")
    return workdir / "sequence-de"


def speed(workdir: Path) -> None:
    from much_dataset.synthetic import make_rows
    from much_metric.baselines import max_likelihood, token_arrays
    from much_metric.learned import LinearDetector, SequenceDetector, token_features

    say()
    say("== 2. Speed on a MUCH-sized synthetic split (NOT MUCH data: much_dataset.synthetic, ~24.5 tokens/sample) ==")
    train, validation = make_rows(4673, seed=0, mean_tokens=24.5), make_rows(700, seed=1, mean_tokens=24.5)
    arrays = token_arrays(train)
    say(f"train: {arrays.n_samples} samples, {arrays.n_tokens:,} tokens; validation: {len(validation)} samples")
    start = time.perf_counter()
    linear = LinearDetector().fit(train, validation, checkpoint=workdir / "speed-linear" / "checkpoint",
                                  progress=False).detector_
    linear_seconds = time.perf_counter() - start
    training = linear.config["training"]
    say(f"linear training (features + {training['epochs']} epochs, early stopping at best {training['best_epoch']}): "
        f"{linear_seconds:.2f} s total, {training['seconds'] / training['epochs']:.3f} s/epoch  [target < 30 s]")
    import datasets

    table_rows = datasets.Dataset.from_list(train)
    start = time.perf_counter()
    _token_label_logistic(table_rows, datasets.Dataset.from_list(train[:1]))
    sklearn_seconds = time.perf_counter() - start
    say(f"scikit-learn token-level logistic regression, same features (lbfgs, to convergence): {sklearn_seconds:.2f} s;"
        f" ratio ours / sklearn = {linear_seconds / sklearn_seconds:.2f}")
    token_features(arrays)  # warm-up
    best = min(_timed(lambda: linear.token_scores(arrays)) for _ in range(5))
    reference = min(_timed(lambda: max_likelihood(arrays)) for _ in range(5))
    say(f"linear inference on the split ({arrays.n_tokens:,} tokens, from its token arrays): {best:.3f} s "
        f"[target < 0.5 s]; Max Likelihood {reference:.3f} s (ratio {best / reference:.1f}x)")
    start = time.perf_counter()
    sequence = SequenceDetector().fit(train, validation, checkpoint=workdir / "speed-sequence" / "checkpoint",
                                      progress=False).detector_
    sequence_seconds = time.perf_counter() - start
    training = sequence.config["training"]
    say(f"sequence training: {training['epochs']} epochs (best {training['best_epoch']}), "
        f"{training['seconds'] / training['epochs']:.1f} s/epoch, {sequence_seconds:.1f} s total")
    best = min(_timed(lambda: sequence.token_scores(arrays)) for _ in range(3))
    say(f"sequence inference on the split: {best:.2f} s")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def monitor(folder: Path) -> None:
    say()
    say("== 3. Live monitor with the sequence detector (trained on the sample without 'de'): "
        "benchmarks/bench_monitor.py --method learned:<folder> ==")
    completed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_monitor.py"), "--method",
                                f"learned:{folder}", "--repeats", "2"], capture_output=True, text=True, cwd=ROOT)
    for line in (completed.stdout + (completed.stderr if completed.returncode else "")).splitlines():
        say("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: least noise on a shared box of 2 cores)")
    parser.add_argument("--skip-table", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--no-monitor", action="store_true", help="skip bench_monitor.py with the sequence detector")
    parser.add_argument("--out", default=None, help="also write the output to this file (run_benchmarks.sh tees it)")
    parser.add_argument("--report", default=None,
                        help="also write much evaluate's HTML report of the held-out ranking to this file")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    say(f"bench_learned.py, torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs visible, "
        f"load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        folder = None if args.skip_table else table(workdir, args.report)
        if not args.skip_speed:
            speed(workdir)
        if not args.no_monitor and folder is not None:
            monitor(folder)
    if args.out:
        Path(args.out).write_text("\n".join(LINES) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
