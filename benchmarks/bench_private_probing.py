"""The label-probing attack on the private board, measured: how much one submission learns about one private label.

    python benchmarks/bench_private_probing.py [--targets 200] [--seed 0] [--out benchmarks/private_probing.txt]

Setup: the embedded sample split in two by ``generation_id`` hash; the odd half is exported with
``python -m builder export --withhold-labels`` (its rows without labels + the label file) and loaded as the board's
:class:`much_leaderboard.PrivateSplit` with the default :class:`much_leaderboard.PrivatePolicy` (ROC-AUC over all
private claims, 2 decimals). Every "submission" below goes through ``PrivateSplit.score``, the board's own scoring
and rounding. The attacker submits a claim-level signal (``@claim``: one score per claim) built from a real detector
(Max Likelihood, product-aggregated) and moves ONE target claim between the lowest and the highest score:

* **naive**: two submissions per target (target lowest, target highest); the label is guessed from the direction the
  shown ROC-AUC moves (up: hallucinated, down: correct, no change: no information);
* **boundary-tuned** (the worst case): the attacker has already placed the unrounded ROC-AUC, with the target lowest,
  just above a rounding boundary (x.xx5): here an oracle does it with the labels, standing for the submissions an
  attacker would spend searching for it (not counted). Moving a correct claim to the top lowers the ROC-AUC by 1/N
  (N correct claims) and crosses the boundary; moving a hallucinated one raises it by 1/P and does not: one
  submission then tells the target's label.

Information: the mutual information between the target's label and what the board showed (plug-in estimate over the
targets), divided by the submissions each probe made. The bound: a submission of S signals gets one of
``(10**decimals + 1)**S`` answers (ranks are functions of the shown values), so it tells at most
``S * log2(10**decimals + 1)`` bits (6.66 per signal at 2 decimals); the daily quota multiplies it by the number
of submissions a submitter may make. Prints a table and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def is_private(generation_id: str) -> bool:
    return int(hashlib.sha256(generation_id.encode()).hexdigest()[:8], 16) % 2 == 1


def export_private_half(work: Path) -> tuple[Path, Path]:
    """Builder artifacts of the odd half of the sample, exported with --withhold-labels: (folder, label file)."""
    import json

    import much_dataset
    from much_dataset import schema

    rows = [r for r in much_dataset.load("sample", split="test") if is_private(r["generation_id"])]
    out = work / "builder"
    out.mkdir(parents=True, exist_ok=True)

    def write(name: str, records: list[dict]) -> None:
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    write("generations.jsonl", [{**{k: r[k] for k in schema.HUB_COLUMNS[:9]}, "finished": True} for r in rows])
    write("segments.jsonl", [{schema.GENERATION_ID: r[schema.GENERATION_ID],
                              schema.TOKEN_CHUNKS: r[schema.TOKEN_CHUNKS],
                              schema.STOPWORD_MASK: r[schema.STOPWORD_MASK]} for r in rows])
    write("labels.mushroom.jsonl", [{schema.GENERATION_ID: r[schema.GENERATION_ID], schema.LABELS: r[schema.LABELS]}
                                    for r in rows])
    configs = sorted({r["generation_config"] for r in rows})
    write("configs.jsonl", [{schema.GENERATION_CONFIG: c, "model_name": c, "temperature": 1.0, "seed": 2,
                             "top_p": 0.9, "top_k": 20, "max_new_tokens": 500} for c in configs])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "builder", "export", "--out", str(out), "--split", "test", "--judge",
                    "mushroom", "--withhold-labels", "--folder", str(work / "private")], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return work / "private", out / "private" / "labels.json"


def exact_auc(scores: np.ndarray, hallucinated: np.ndarray) -> float:
    from much_metric.scoring import roc_curve

    fpr, tpr = roc_curve(scores, hallucinated)
    return float(np.trapezoid(tpr, fpr))


class Probe:
    """One attacker against one private split: a base claim-level signal and the oracle's view of the labels."""

    def __init__(self, split, labels_path: Path, *, seed: int = 0) -> None:
        from much_dataset.label_files import read_label_file
        from much_metric import aggregate_claims
        from much_metric.baselines import compute_signals

        self.split = split
        rows = split.rows
        ids = [str(g) for g in rows["generation_id"]]
        tokens = compute_signals(rows, ["max_likelihood"], progress=False)["max_likelihood"].values
        claims = aggregate_claims([tokens[g] for g in ids], rows["token_chunks"], rows["stopword_mask"])
        self.ids, self.sizes = ids, [len(c) for c in claims]  # evaluated claims per row (EOS dropped)
        self.base = np.concatenate(claims)
        truth = read_label_file(labels_path).rows  # the oracle: an attacker who already found the boundary
        self.hallucinated = np.concatenate([np.asarray(truth[g]["labels"][:-1]) == -1 for g in ids])
        self.noise = np.random.default_rng(seed).random(len(self.base))
        self.n_positive = int(self.hallucinated.sum())
        self.n_negative = len(self.base) - self.n_positive

    def submit(self, claim_scores: np.ndarray) -> float | None:
        """One submission through the board's scoring: the shown (rounded) private ROC-AUC."""
        per_row, start = {}, 0
        for gid, size in zip(self.ids, self.sizes, strict=True):
            per_row[gid] = np.append(claim_scores[start: start + size], 0.0)  # + the EOS claim's (ignored)
            start += size
        return self.split.score({"probe@claim": per_row})["probe@claim"]

    def with_target(self, scores: np.ndarray, target: int, high: bool) -> np.ndarray:
        scores = scores.copy()
        scores[target] = scores.max() + 1.0 if high else scores.min() - 1.0
        return scores

    def tuned_base(self, target: int, boundary: float) -> np.ndarray:
        """Scores mixing the base and noise so that, target lowest, the exact ROC-AUC lies in
        [boundary, boundary + 1/(2N)) (bisection on the mixing weight, with the oracle's labels)."""
        def auc(weight: float) -> tuple[float, np.ndarray]:
            scores = self.with_target((1 - weight) * self.base + weight * self.noise, target, high=False)
            return exact_auc(scores, self.hallucinated), scores

        low, high = 0.0, 1.0  # auc(0) > boundary > auc(1)
        for _ in range(60):
            middle = (low + high) / 2
            value, scores = auc(middle)
            if value >= boundary:
                low = middle
            else:
                high = middle
        value, scores = auc(low)
        if not boundary <= value < boundary + 0.5 / self.n_negative:
            raise RuntimeError(f"tuning missed the boundary: {value} for {boundary}")
        return scores


def mutual_information(labels: list[bool], shown: list[str]) -> float:
    """Plug-in mutual information (bits) between the target labels and what the board showed."""
    n = len(labels)
    joint, by_label, by_shown = Counter(zip(labels, shown, strict=True)), Counter(labels), Counter(shown)
    return sum(c / n * math.log2(c * n / (by_label[a] * by_shown[b])) for (a, b), c in joint.items())


def entropy(labels: list[bool]) -> float:
    p = sum(labels) / len(labels)
    return 0.0 if p in (0, 1) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def run(split, labels_path: Path, *, targets: int, seed: int = 0) -> dict:
    """Both attacks on ``targets`` random claims: per strategy, accuracy, submissions per probe, bits per
    submission; and the policy's bound."""
    probe = Probe(split, labels_path, seed=seed)
    chosen = np.random.default_rng(seed + 1).choice(len(probe.base), size=targets, replace=False)
    labels = [bool(probe.hallucinated[t]) for t in chosen]
    base_auc = exact_auc(probe.base, probe.hallucinated)
    boundary = math.floor(base_auc * 100 - 1) / 100 + 0.005  # a rounding boundary below the base ROC-AUC
    naive, tuned, guesses = [], [], {"naive": [], "tuned": []}
    for target in chosen:
        low = probe.submit(probe.with_target(probe.base, target, high=False))
        high = probe.submit(probe.with_target(probe.base, target, high=True))
        naive.append("up" if high > low else "down" if high < low else "same")
        guesses["naive"].append(naive[-1] == "up" if naive[-1] != "same" else False)
        scores = probe.tuned_base(target, boundary)
        shown_low = round(exact_auc(scores, probe.hallucinated), split.policy.decimals)
        moved = probe.submit(probe.with_target(scores, target, high=True))
        tuned.append("same" if moved == shown_low else "down" if moved < shown_low else "up")
        guesses["tuned"].append(tuned[-1] == "same")
    policy = split.policy
    result = {"targets": targets, "claims": len(probe.base), "positives": probe.n_positive,
              "label_entropy": entropy(labels), "base_auc": base_auc,
              "bound_per_signal": policy.bits_per_submission(1), "bound_8_signals": policy.bits_per_submission(8),
              "daily_limit": policy.daily_limit}
    for name, shown, submissions in (("naive", naive, 2), ("tuned", tuned, 1)):
        information = mutual_information(labels, shown)
        result[name] = {"accuracy": float(np.mean([g == a for g, a in zip(guesses[name], labels, strict=True)])),
                        "submissions_per_probe": submissions, "bits_per_probe": information,
                        "bits_per_submission": information / submissions, "shown": dict(Counter(shown))}
    return result


def report(result: dict, *, seconds: float) -> str:
    lines = [f"Label probing on the private board (embedded sample, odd half: {result['claims']:,} claims, "
             f"{result['positives']:,} hallucinated; {result['targets']} target claims; label entropy "
             f"{result['label_entropy']:.3f} bits; base ROC-AUC {result['base_auc']:.4f}; 2 decimals shown)",
             "", "| attack | submissions per probe | label guessed right | bits per probe | bits per submission |",
             "|---|---|---|---|---|"]
    for name, label in (("naive", "naive (target lowest, then highest)"),
                        ("tuned", "boundary-tuned by an oracle (tuning not counted)")):
        found = result[name]
        lines.append(f"| {label} | {found['submissions_per_probe']} | {found['accuracy']:.1%} | "
                     f"{found['bits_per_probe']:.3f} | {found['bits_per_submission']:.3f} |")
    lines += ["", f"Bound: {result['bound_per_signal']:.2f} bits per signal per submission "
                  f"({result['bound_8_signals']:.1f} for an archive's 8 signals); quota {result['daily_limit']} "
                  f"submission(s) with private values per submitter per 24 hours.",
              f"({seconds:.0f} s on {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at start)"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=200, help="target claims probed (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "private_probing.txt"))
    args = parser.parse_args(argv)
    from much_leaderboard import PrivateSplit

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        folder, labels = export_private_half(Path(work))
        result = run(PrivateSplit(folder, labels), labels, targets=args.targets, seed=args.seed)
    text = report(result, seconds=time.perf_counter() - start)
    print(text, end="")
    Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
