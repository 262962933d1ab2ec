"""agreement: claim-level confusion matrices and Cohen's kappa between annotators (the paper's figure 3).

``python -m builder agreement --out DIR --annotators gpt-4o gpt-4.1 an0 an1 [--scope all|kept]`` compares every pair
of the named annotators on the samples both labelled. A name is read from ``human.<name>.jsonl`` when it exists, else
from ``labels.<name>.jsonl``; the name ``gpt`` is the judges' consensus (samples where ``gpt-4o`` and ``gpt-4.1``
agree, as the paper's figures 3c-3d). ``--scope kept`` restricts to samples ``filter.jsonl`` keeps ("after
filtering"), ``all`` (default) uses every sample ("before filtering"). The EOS claim (always +1) is excluded.

Confusion matrices: rows = first annotator, columns = second, order (-1 hallucinated, +1 correct). Results are
printed and written to ``agreement.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from builder.errors import BuilderError
from builder.filter import judge_kappa, load_labels
from builder.store import atomic_write_text, read_store
from much_dataset.schema import CORRECT, GENERATION_ID, HALLUCINATED

__all__ = ["label_agreement", "load_annotator", "add_arguments", "run"]

_ORDER = [HALLUCINATED, CORRECT]


def label_agreement(first: Mapping[str, Sequence[int]], second: Mapping[str, Sequence[int]], *,
            names: tuple[str, str] = ("a", "b")) -> dict[str, Any]:
    """Confusion matrix (2x2, order -1, +1; rows = ``first``) and kappa over the shared samples' non-EOS claims.

    Raises ``ValueError`` naming the generation_id when the two label lists of a sample differ in length.
    """
    from sklearn.metrics import confusion_matrix

    shared = sorted(set(first) & set(second))
    for gid in shared:
        if len(first[gid]) != len(second[gid]):
            raise ValueError(f"generation_id={gid!r}: field 'labels' has {len(first[gid])} claims for {names[0]} "
                             f"but {len(second[gid])} for {names[1]}")
    a = np.array([v for gid in shared for v in first[gid][:-1]], dtype=np.int64)
    b = np.array([v for gid in shared for v in second[gid][:-1]], dtype=np.int64)
    matrix = confusion_matrix(a, b, labels=_ORDER) if len(a) else np.zeros((2, 2), dtype=np.int64)
    kappa, n_claims = judge_kappa((first[gid], second[gid]) for gid in shared)
    return {"annotators": list(names), "samples": len(shared), "claims": n_claims, "kappa": kappa,
            "confusion": matrix.tolist(), "order": _ORDER}


def load_annotator(out: Path, name: str) -> dict[str, list[int]]:
    """Labels per generation_id of annotator ``name`` (human file first, then judge file; ``gpt`` = consensus)."""
    if name == "gpt":
        a, b = load_labels(out, "gpt-4o"), load_labels(out, "gpt-4.1")
        return {gid: labels for gid, labels in a.items() if b.get(gid) == labels}
    if (out / f"human.{name}.jsonl").exists():
        return load_labels(out, name, prefix="human")
    if (out / f"labels.{name}.jsonl").exists():
        return load_labels(out, name)
    raise FileNotFoundError(f"no human.{name}.jsonl or labels.{name}.jsonl in {out}")


def _format(result: dict[str, Any]) -> str:
    (hh, hc), (ch, cc) = result["confusion"]
    a, b = result["annotators"]
    return (f"{a} (rows) vs {b} (columns): {result['samples']} samples, {result['claims']} claims, "
            f"kappa = {result['kappa']:.3f}\n"
            f"{'':>14}{'-1':>8}{'+1':>8}\n{a + ' -1':>14}{hh:>8}{hc:>8}\n{a + ' +1':>14}{ch:>8}{cc:>8}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--annotators", nargs="+", required=True,
                        help="two or more of: an0, an1, gpt-4o, gpt-4.1, gpt (judge consensus), ...")
    parser.add_argument("--scope", choices=("all", "kept"), default="all",
                        help="all samples (before filtering) or those filter.jsonl keeps (after)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if len(args.annotators) < 2:
        raise BuilderError("--annotators needs at least two names")
    labels = {name: load_annotator(out, name) for name in args.annotators}
    if args.scope == "kept":
        kept = {r[GENERATION_ID] for r in read_store(out / "filter.jsonl") if r["split"] != "trash"}
        if not kept:
            raise BuilderError("--scope kept needs filter.jsonl (run `filter` first)")
        labels = {name: {g: v for g, v in rows.items() if g in kept} for name, rows in labels.items()}
    results = [label_agreement(labels[a], labels[b], names=(a, b))
               for a, b in itertools.combinations(args.annotators, 2)]
    for result in results:
        print(_format(result) + "\n")
    atomic_write_text(out / "agreement.json", json.dumps({"scope": args.scope, "pairs": results}, indent=2) + "\n")
    return 0
