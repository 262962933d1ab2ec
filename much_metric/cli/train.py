"""``much train``: train a learned detector on MUCH's claim labels under a named protocol.

Examples::

    much train --source sample --protocol leave-one-language-out --fold de --detector linear --out runs/linear-de
    much train --source orailix/MUCH --protocol auto-to-manual --detector sequence --out runs/sequence
    much train --source sample --internals PACK --detector probe --out runs/probe          # one folder per language
    much train --source sample --internals PACK --detector claim_head --fold de --out runs/head-de

Each fold of the protocol (see :mod:`much_metric.learned.splits`: grouped by question, Wikipedia article across
languages and generation, checked for leakage; each fold prints what it purged) trains one detector with early
stopping on its validation part and is written to ``--out`` (one fold, or ``--fold`` given) or ``--out/<fold>``
(every fold). A killed run resumes from the last finished epoch when rerun
with the same arguments. The held-out test part of each fold is then scored with the metric and printed next to
``--baseline`` (Max Likelihood by default) on the same claims, with the paired difference and the protocol's name.
Score the detector elsewhere with ``much run --signals learned:DIR``: the rows it was trained and validated on
(``DIR/training_rows.json``) are left out there unless ``--include-training-rows`` is given.

``--detector probe`` and ``--detector claim_head`` read an internals pack (``python -m builder internals``) given
with ``--internals PACK``: the pack must hold every row of ``--source``/``--config`` with its token count; the folder
records the pack's model, weights hash and the hidden layer (``--layer``) or attention window it read, and is
scored with ``much run --internals PACK --signals learned:DIR`` on a pack of the same model only.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from much_metric.cli._flags import add_renamed_alias
from much_metric.cli._text import fits_width
from much_metric.learned import KINDS, PROTOCOLS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="train a learned detector (linear, sequence, probe or claim_head) on MUCH's claim labels",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--source", default="sample", help="'sample' (default, offline), orailix/MUCH, or a folder")
    add_renamed_alias(parser, "--data", "--source", dest="source")
    parser.add_argument("--config", default="all", help="dataset config: all, en, fr, es or de (default: all)")
    parser.add_argument("--protocol", default="leave-one-language-out", choices=tuple(PROTOCOLS),
                        help="auto-to-manual, leave-one-language-out (default) or leave-one-model-out")
    parser.add_argument("--fold", default=None, help="only this fold's held-out value (e.g. de)")
    parser.add_argument("--detector", choices=tuple(KINDS), default="linear",
                        help="the detector kind (much_metric.learned.KINDS, plugins' kinds included)")
    parser.add_argument("--out", required=True, help="detector folder (checkpoints under <out>/checkpoint)")
    parser.add_argument("--aggregator", default="product", help="claim aggregator of the loss (default product)")
    parser.add_argument("--stopword-handling", choices=("null", "exclude"), default="null",
                        help="null (reference, default): stopword tokens score 0; exclude: removed from claims")
    add_renamed_alias(parser, "--stopwords", "--stopword-handling", dest="stopword_handling",
                      choices=("null", "exclude"))
    parser.add_argument("--random-state", type=int, default=0,
                        help="initialisation, batch order and validation draw (default 0)")
    parser.add_argument("--validation-fraction", type=float, default=0.15)
    parser.add_argument("--max-epochs", type=int, default=None)
    parser.add_argument("--patience", type=int, default=None, help="epochs without validation improvement")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--hidden", type=int, default=None,
                        help="the sequence detector's GRU state / the claim head's width (default 32)")
    parser.add_argument("--internals", default=None,
                        help="internals pack (python -m builder internals) read by --detector probe / claim_head")
    parser.add_argument("--layer", type=int, default=None,
                        help="the probe's hidden_states index (one of the pack's hidden_layers; default: the middle)")
    parser.add_argument("--hyper", action="append", default=[], metavar="NAME=VALUE",
                        help="any hyper-parameter of --detector (repeatable; the value is read as JSON, else as a "
                             "string): a detector kind of a plugin brings its own")
    parser.add_argument("--baseline", default="max_likelihood", metavar="NAME",
                        help="the method the held-out numbers are compared with, paired on the same claims: a "
                        "token-level signal computed from the probabilities alone (default: %(default)s)")
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


def check_train_baseline(name: str) -> Any:
    """The :class:`~much_metric.baselines.BaselineSpec` of ``--baseline``: a token-level signal that needs no
    resource (``much train`` loads none), checked before the data loads."""
    from much_metric.baselines import resolve

    spec = resolve(name)
    if spec.baseline.level != "token" or spec.needs:
        why = "scores claims" if spec.baseline.level != "token" else f"needs {', '.join(spec.needs)}"
        raise ValueError(f"--baseline {name}: it {why}, and much train compares on token scores computed from the "
                         "probabilities alone (e.g. max_likelihood, token_entropy_24); compare it with "
                         "`much run --signals learned:DIR,NAME --baseline NAME`")
    return spec


def held_out_scores(dataset: Any, folder: Path, internals: Any = None, *,
                    baseline: str = "max_likelihood") -> dict[str, dict[str, Any]]:
    """ROC-AUC/PR-AUC of the detector and of ``baseline`` on ``dataset``'s claims (the detector's aggregator), and
    the detector's paired ROC-AUC difference to it (``delta_roc_auc``: :func:`much_metric.compare`'s, 1000
    resamples, seed 0); ``internals``: the pack a probe or claim head reads."""
    from much_metric.baselines import token_arrays
    from much_metric.learned import load_detector
    from much_metric.scoring import Aggregation, Bootstrap, compare, score

    spec = check_train_baseline(baseline)
    detector = load_detector(folder)
    arrays = token_arrays(dataset)
    masks = dataset["stopword_mask"] if "stopword_mask" in dataset.column_names else None
    common = {"aggregation": Aggregation(aggregator=detector.config["aggregator"],
                                         stopword_handling=detector.config["stopword_handling"])}
    chunks, labels = dataset["token_chunks"], dataset["labels"]
    scores = arrays.split(detector.token_scores(arrays, internals))
    reference = spec.split(arrays, spec.compute(arrays, {}, {}))
    # the paired difference on the same claims: overlapping marginal intervals say little
    delta = compare(scores, reference, chunks, labels, masks, bootstrap=Bootstrap(), **common).roc_auc
    return {"learned": score(scores, chunks, labels, masks, **common).to_dict(),
            "baseline": score(reference, chunks, labels, masks, **common).to_dict(),
            "delta_roc_auc": delta.to_dict()}


def _hyper(kind: Any, given: list[str]) -> dict[str, Any]:
    """``--hyper NAME=VALUE`` options: each a hyper-parameter of the kind, the value read as JSON (else a string)."""
    import json

    options = {}
    for text in given:
        name, separator, value = text.partition("=")
        name = name.strip().replace("-", "_")
        if not separator or name not in kind.defaults:
            raise ValueError(f"--hyper {text!r}: expected NAME=VALUE with NAME one of the {kind.name} detector's "
                             f"hyper-parameters ({', '.join(kind.defaults)})")
        try:
            options[name] = json.loads(value)
        except json.JSONDecodeError:
            options[name] = value
    return options


def estimator(args: argparse.Namespace) -> Any:
    """The estimator of ``--detector`` with the options given (checked now, before the data loads)."""
    from much_metric.learned import estimator_class
    from much_metric.scoring import Aggregation

    kind = KINDS[args.detector]
    given = {"learning_rate": args.learning_rate, "batch_size": args.batch_size, "max_epochs": args.max_epochs,
             "patience": args.patience, "hidden": args.hidden, "layer": args.layer}
    options = {key: value for key, value in given.items() if value is not None}
    for key in options:
        if key not in kind.defaults:
            users = " and ".join(name for name, other in KINDS.items() if key in other.defaults)
            raise ValueError(f"--{key.replace('_', '-')} applies to the {users} detector"
                             f"{'s' if ' and ' in users else ''}, not to --detector {args.detector}")
    options.update(_hyper(kind, args.hyper))
    if kind.needs_internals and args.internals is None:
        raise ValueError(f"--detector {args.detector} reads an internals pack: pass --internals PACK (python -m "
                         "builder internals)")
    if not kind.needs_internals and args.internals is not None:
        raise ValueError(f"--internals is read by the detectors that read a pack "
                         f"({', '.join(name for name, other in KINDS.items() if other.needs_internals)}), not by "
                         f"--detector {args.detector}")
    cls = estimator_class(args.detector)
    try:
        aggregation = Aggregation(aggregator=args.aggregator, stopword_handling=args.stopword_handling)
        return cls(aggregation=aggregation, random_state=args.random_state, **options)
    except ValueError as error:  # "<Owner>: <name> must be ...": name the flag, not the keyword
        message = str(error).split(": ", 1)[-1]
        name, _, rest = message.partition(" ")
        flag = f"--{name.replace('_', '-')}" if name in (*given, "aggregator", "stopword_handling",
                                                          "random_state") else f"--hyper {name}"
        raise ValueError(f"{flag} {rest}") from error


@fits_width  # the held-out lines, with their `much run` commands, wrapped at 120 columns
def run(args: argparse.Namespace) -> int:
    import importlib.util

    from much_metric.learned import make_folds, row_info

    missing = [name for name in ("torch", "safetensors") if importlib.util.find_spec(name) is None]
    if missing:  # the extra is `learned`, not `models` (the generic hint for a missing torch)
        raise ModuleNotFoundError(f"much train needs {' and '.join(missing)}: install the extra 'learned' "
                                  "(from the toolkit's checkout: pip install '.[learned]')")

    if not 0.0 < args.validation_fraction < 1.0:  # before the data loads
        raise ValueError(f"--validation-fraction must be in (0, 1), got {args.validation_fraction}")
    model = estimator(args)
    label = check_train_baseline(args.baseline).display

    dataset, origin = load_with_origin(args.source, args.config)
    pack = None
    if args.internals is not None:  # every row with its token count, before any training
        from much_dataset.internals import load_internals

        pack = load_internals(args.internals, dataset=dataset)
    folds = make_folds(row_info(dataset, origin=origin), args.protocol, validation_fraction=args.validation_fraction,
                       random_state=args.random_state, only=args.fold)
    for fold in folds:
        folder = fold_folder(Path(args.out), fold.name, len(folds), args.fold)
        print(fold.describe())
        protocol = {"name": args.protocol, "fold": fold.name, "data": args.source, "config": args.config,
                    "n_test": int(len(fold.test)), "purged": dict(fold.purged)}
        if pack is not None:
            protocol["internals"] = str(args.internals)
        model.fit(dataset.select(fold.train), dataset.select(fold.validation), internals=pack,
                  checkpoint=folder / "checkpoint", protocol=protocol, progress=not args.no_progress)
        model.save(folder)
        trained = set(fold.train.tolist()) | set(fold.validation.tolist())
        held_out = [i for i in range(len(dataset)) if i not in trained]  # what `much run` scores by default
        command = much_run_command(args, folder)
        test_command = _test_rows_command(args, fold, folder)
        for rows, what, reproduce in (
                (fold.test, f"held-out test ({len(fold.test)} {fold.name} rows)", test_command),
                (held_out, f"every row it did not train or validate on ({len(fold.test)} test + "
                           f"{len(held_out) - len(fold.test)} purged)", command)):
            results = held_out_scores(dataset.select(rows), folder, pack, baseline=args.baseline)
            learned, baseline, delta = results["learned"], results["baseline"], results["delta_roc_auc"]
            low, high = delta["interval"]
            print(f"  {args.protocol} [{fold.name}] {what}, {learned['n_claims']} claims: {args.detector} "
                  f"ROC-AUC {learned['roc_auc']:.3f} PR-AUC {learned['pr_auc']:.3f}; {label} ROC-AUC "
                  f"{baseline['roc_auc']:.3f} PR-AUC {baseline['pr_auc']:.3f}; Δ ROC-AUC vs {label} "
                  f"{delta['difference']:+.3f} [{low:+.3f}, {high:+.3f}] p={delta['p_value']:.3f} (paired bootstrap)"
                  + (f" -- `{reproduce}` prints these" if reproduce else ""))
        print(f"  detector written to {folder} (score it with `{command}`; its "
              f"{len(fold.train) + len(fold.validation)} training and validation rows are left out there, for every "
              "signal of the table)")
    return 0


def much_run_command(args: argparse.Namespace, folder: Path, *, config: str | None = None, extra: str = "") -> str:
    """The ``much run`` command that scores the detector of ``folder`` beside ``--baseline`` with the options it
    was trained with (data, aggregator, stopword handling, pack): its numbers are the ones ``much train`` printed
    for the same rows."""
    parts = ["much run", f"--source {args.source}"]
    config = config if config is not None else args.config
    if config != "all":
        parts.append(f"--config {config}")
    parts.append(extra)
    if args.internals is not None:
        parts.append(f"--internals {args.internals}")
    parts.append(f"--signals learned:{folder},{args.baseline} --baseline {args.baseline}")
    if args.aggregator != "product":
        parts.append(f"--aggregator {args.aggregator}")
    if args.stopword_handling != "null":
        parts.append(f"--stopword-handling {args.stopword_handling}")
    return " ".join(part for part in parts if part)


def _test_rows_command(args: argparse.Namespace, fold: Any, folder: Path) -> str | None:
    """The ``much run`` command that scores exactly the fold's test rows, where a data option selects them: a
    language fold (``--config``), the auto-to-manual test rows (``--split test --selection manual``); None for a
    model fold (no option selects one model's rows)."""
    key, _, value = fold.name.partition("=")
    if key == "lang" and args.config == "all":
        return much_run_command(args, folder, config=value)
    if args.protocol == "auto-to-manual":
        return much_run_command(args, folder, extra="--split test --selection manual")
    return None
