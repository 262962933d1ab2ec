"""``much train``: train a learned detector on MUCH's claim labels under a named protocol.

Examples::

    much train --data sample --protocol leave-one-language-out --fold de --detector linear --out runs/linear-de
    much train --data orailix/MUCH --protocol auto-to-manual --detector sequence --out runs/sequence

Each fold of the protocol (see :mod:`much_metric.learned.splits`: grouped by question and generation, checked for
leakage) trains one detector with early stopping on its validation part and is written to ``--out`` (one fold, or
``--fold`` given) or ``--out/<fold>`` (every fold). A killed run resumes from the last finished epoch when rerun
with the same arguments. The held-out test part of each fold is then scored with the metric and printed next to
Max Likelihood on the same claims, with the protocol's name. Score the detector elsewhere with
``much run --signals learned:DIR``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from much_metric.learned.splits import PROTOCOLS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="train a learned detector (linear or sequence) on MUCH's claim labels",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", default="sample", help="'sample' (default, offline), orailix/MUCH, or a folder")
    parser.add_argument("--config", default="all", help="dataset config: all, en, fr, es or de (default: all)")
    parser.add_argument("--protocol", default="leave-one-language-out", choices=tuple(PROTOCOLS),
                        help="auto-to-manual, leave-one-language-out (default) or leave-one-model-out")
    parser.add_argument("--fold", default=None, help="only this fold's held-out value (e.g. de)")
    parser.add_argument("--detector", choices=("linear", "sequence"), default="linear")
    parser.add_argument("--out", required=True, help="detector folder (checkpoints under <out>/checkpoint)")
    parser.add_argument("--aggregator", default="product", help="claim aggregator of the loss (default product)")
    parser.add_argument("--stopwords", choices=("null", "exclude"), default="null")
    parser.add_argument("--seed", type=int, default=0, help="initialisation, batch order and validation draw")
    parser.add_argument("--validation-fraction", type=float, default=0.15)
    parser.add_argument("--max-epochs", type=int, default=None)
    parser.add_argument("--patience", type=int, default=None, help="epochs without validation improvement")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def load_with_origin(source: str, config: str) -> tuple[Any, list[str]]:
    """Both published splits concatenated, and the split of each row."""
    import datasets

    import much_dataset

    loaded = much_dataset.load(source, config=config)
    if not isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.DatasetDict({"test": loaded})
    names = [name for name in loaded if len(loaded[name])]
    dataset = datasets.concatenate_datasets([loaded[name] for name in names])
    return dataset, [name for name in names for _ in range(len(loaded[name]))]


def fold_folder(out: Path, fold_name: str, n_folds: int, only: str | None) -> Path:
    if n_folds == 1 or only is not None:
        return out
    return out / re.sub(r"[^\w.-]", "-", fold_name.split("=")[-1])


def held_out_scores(dataset: Any, folder: Path) -> dict[str, dict[str, Any]]:
    """ROC-AUC/PR-AUC of the detector and of Max Likelihood on ``dataset``'s claims (the detector's aggregator)."""
    from much_metric.baselines import max_likelihood, token_arrays
    from much_metric.learned import load_detector
    from much_metric.scoring import score

    detector = load_detector(folder)
    arrays = token_arrays(dataset)
    masks = dataset["stopword_mask"] if "stopword_mask" in dataset.column_names else None
    common = {"aggregator": detector.config["aggregator"],
              "stopword_handling": detector.config["stopword_handling"]}
    chunks, labels = dataset["token_chunks"], dataset["labels"]
    return {"learned": score(arrays.split(detector.token_scores(arrays)), chunks, labels, masks, **common).to_dict(),
            "max_likelihood": score(max_likelihood(arrays), chunks, labels, masks, **common).to_dict()}


def run(args: argparse.Namespace) -> int:
    from much_metric.learned import make_folds, row_info, train_detector

    if not 0.0 < args.validation_fraction < 1.0:  # before the data loads
        raise ValueError(f"--validation-fraction must be in (0, 1), got {args.validation_fraction}")
    for option in ("max_epochs", "patience", "batch_size"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise ValueError(f"--{option.replace('_', '-')} must be a positive integer, got {value}")

    dataset, origin = load_with_origin(args.data, args.config)
    folds = make_folds(row_info(dataset, origin=origin), args.protocol, validation_fraction=args.validation_fraction,
                       seed=args.seed, only=args.fold)
    for fold in folds:
        folder = fold_folder(Path(args.out), fold.name, len(folds), args.fold)
        print(fold.describe())
        protocol = {"name": args.protocol, "fold": fold.name, "data": args.data, "config": args.config,
                    "n_test": int(len(fold.test)), "n_purged": fold.n_purged}
        train_detector(dataset.select(fold.train), dataset.select(fold.validation), folder, detector=args.detector,
                       aggregator=args.aggregator, stopword_handling=args.stopwords, seed=args.seed,
                       learning_rate=args.learning_rate, batch_size=args.batch_size, max_epochs=args.max_epochs,
                       patience=args.patience, protocol=protocol, progress=not args.no_progress)
        results = held_out_scores(dataset.select(fold.test), folder)
        learned, baseline = results["learned"], results["max_likelihood"]
        print(f"  {args.protocol} [{fold.name}] held-out test, {learned['n_claims']} claims: {args.detector} "
              f"ROC-AUC {learned['roc_auc']:.3f} PR-AUC {learned['pr_auc']:.3f}; Max Likelihood ROC-AUC "
              f"{baseline['roc_auc']:.3f} PR-AUC {baseline['pr_auc']:.3f}")
        print(f"  detector written to {folder} (score it with `much run --signals learned:{folder}`)")
    return 0
