"""``much calibrate --conformal``: calibrate a conformal claim filter for one signal and write its threshold file.

The signal's claim scores are the ones ``much evaluate`` scores (same aggregator, stopword rule, claim-level
``@claim`` signals as given); the labelled answers of ``--source`` are the calibration set. The threshold file
(JSON: method, signal, alpha, guarantee, groups with their sizes, calibration rows and their hash) is read by
``much monitor --conformal FILE`` and :func:`much_metric.conformal.filter_claims`.

Example::

    much run --source sample --signals token_entropy_24 --out signals/
    much calibrate --conformal --source sample --scores signals/ --signal token_entropy_24 --alpha 0.1 --by lang \\
        --output thresholds.json

``--guarantee answer`` (default, Mohri & Hashimoto 2024): P(every kept claim of a new answer is correct) >= 1 - alpha.
``--guarantee claim`` (conformal selection, Jin & Candès 2023): the expected fraction of hallucinated claims among
the kept ones <= alpha. Both assume the new answers exchangeable with the calibration answers (of their group with
``--by``). See docs/conformal.md.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="calibrate a conformal claim filter with a guarantee (writes a threshold file)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--conformal", action="store_true",
                        help="conformal calibration (the only kind here; isotonic probabilities are `much evaluate "
                             "--calibrate-on`)")
    parser.add_argument("--source", default=None, help="labelled calibration data: 'sample', a hub id or a folder")
    parser.add_argument("--config", default="all", help="dataset config: all, en, fr, es or de (default: all)")
    parser.add_argument("--split", default=None, help="split to calibrate on (default: every split)")
    parser.add_argument("--selection", choices=("all", "manual", "auto"), default="all")
    parser.add_argument("--labels", default="labels", help="ground truth, as in much evaluate (default labels)")
    parser.add_argument("--scores", required=True, help="MUCH-signals file or folder (`much run --out DIR`)")
    parser.add_argument("--signal", default=None, help="the signal to calibrate (needed when --scores holds several)")
    parser.add_argument("--aggregator", default="product", choices=("product", "mean", "max", "geometric"))
    parser.add_argument("--stopword-handling", choices=("null", "exclude"), default="null")
    parser.add_argument("--alpha", type=float, default=0.1, help="error level in (0, 1) (default 0.1)")
    parser.add_argument("--guarantee", choices=("answer", "claim"), default="answer",
                        help="answer: every kept claim of an answer correct w.p. >= 1 - alpha (default); claim: "
                             "expected share of hallucinated kept claims <= alpha")
    parser.add_argument("--by", default=None,
                        help="calibrate per group: lang, generation_config, model or temperature")
    parser.add_argument("--min-answers", type=int, default=None,
                        help="least calibration answers per group (default 20; a smaller group is refused)")
    parser.add_argument("--output", required=True, help="the threshold file to write (JSON)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from much_metric.benchmark import DataOptions, evaluate_files
    from much_metric.conformal import MIN_ANSWERS, calibrate, claims_from_result
    from much_metric.report import EvaluationOptions
    from much_metric.scoring import Aggregation

    if not args.conformal:
        raise ValueError("much calibrate needs --conformal (the only calibration it makes; isotonic probabilities "
                         "are `much evaluate --calibrate-on`)")
    if args.source is None:
        raise ValueError("--source is required: the labelled calibration data ('sample', a hub id or a folder)")
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    aggregation = Aggregation(aggregator=args.aggregator, stopword_handling=args.stopword_handling)
    evaluation = EvaluationOptions(aggregation=(aggregation,), by=(args.by,) if args.by else (), bootstrap=None,
                                   labels=args.labels, floors=False, paired=False)
    report = evaluate_files(args.source, args.scores, signals=[args.signal] if args.signal else None,
                            evaluation=evaluation,
                            data=DataOptions(config=args.config, split=args.split, selection=args.selection))
    results = report.table.results
    if len(results) != 1:
        names = sorted({r.signal_name for r in results})
        raise ValueError(f"--scores {args.scores} holds {len(names)} signals ({', '.join(names)}): pick one with "
                         "--signal")
    result = results[0]
    claims = claims_from_result(result, report.table.generation_ids)
    aggregation_record = ({"level": "claim"} if result.level == "claim" else
                          {"aggregator": args.aggregator, "stopword_handling": args.stopword_handling})
    fitted = calibrate(claims, alpha=args.alpha, guarantee=args.guarantee, by=args.by,
                       min_answers=MIN_ANSWERS if args.min_answers is None else args.min_answers,
                       ).for_signal(result.signal_name, aggregation_record)
    fitted.save(args.output)
    print(fitted.describe())
    for name, group in sorted(fitted.groups.items()):
        rule = (f"keep claims with score < {group.threshold:.6g}" if fitted.guarantee == "answer" else
                f"{group.n_hallucinated} hallucinated calibration claims for the p-values")
        print(f"  {args.by or 'all'}={name or '*'}: {group.n_answers} answers, {group.n_claims} claims: {rule}")
    print(f"threshold file written to {args.output} (calibration hash {fitted.calibration_hash[:12]})")
    return 0
