"""``bench_internals.py detectors``: the detectors on internals against the probability ones, per held-out language.

Protocol: ``leave-one-language-out`` of :func:`much_metric.learned.make_folds` (the pool purged of every row that
shares a question, a Wikipedia article -- across languages -- or a generation with the test language, then 15 %
of it held out by whole components for validation). On every fold it trains, on the same rows:

* the linear probe (:class:`~much_metric.learned.ProbeDetector`, hidden_states[16] by default);
* the claim head (:class:`~much_metric.learned.ClaimHeadDetector`);
* the two probability-only learned kinds (:class:`~much_metric.learned.LinearDetector`,
  :class:`~much_metric.learned.SequenceDetector`); the "best probability-only" row is the one of the two with the
  higher *validation* ROC-AUC on that fold (never chosen on the test rows);

and scores them with Token Likelihood and RAUQ on every row of the held-out language (product aggregator, null
stopwords): ROC-AUC with a 95 % bootstrap interval over samples and the paired bootstrap p-value against Token
Likelihood on the same claims. Detector folders are written under ``--work`` and reused by a rerun when they hold the
same fold's rows and hyper-parameters (a killed run resumes; training checkpoints resume mid-fit): ``--only LANG``
trains and prints one fold (several can run side by side on different languages), a run without it then reuses
their folders and prints the whole table. Delete ``--work`` after changing the detectors' code.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

TOKEN_LIKELIHOOD = "Token Likelihood"
BEST = "Best probability-only learned (by validation)"


def _estimators(random_state: int, layer: int | None) -> dict[str, Any]:
    from much_metric.learned import ClaimHeadDetector, LinearDetector, ProbeDetector, SequenceDetector

    return {"probe": ProbeDetector(layer=layer, random_state=random_state),
            "claim_head": ClaimHeadDetector(random_state=random_state),
            "linear": LinearDetector(random_state=random_state),
            "sequence": SequenceDetector(random_state=random_state)}


def _trained(estimator: Any, folder: Path, parts: tuple[Any, Any], pack: Any, protocol: dict) -> tuple[Any, float]:
    """The detector of ``folder`` when it holds these rows and hyper-parameters, else fitted and saved there."""
    from much_metric.learned import DetectorFolderError, load_detector

    train, validation = parts
    rows = {"train": sorted(train["generation_id"]), "validation": sorted(validation["generation_id"])}
    if (folder / "config.json").exists():
        try:
            detector = load_detector(folder)
        except DetectorFolderError:
            detector = None
        params = estimator.get_params()
        if detector is not None and detector.training_rows == rows and all(
                detector.config["hyperparameters"].get(key) == value for key, value in params.items()
                if key in detector.config["hyperparameters"]) and detector.config["random_state"] == \
                params["random_state"]:
            return detector, float(detector.config["training"]["seconds"])
    needs = estimator.kind in ("probe", "claim_head")
    estimator.fit(train, validation, internals=pack if needs else None, checkpoint=folder / "checkpoint",
                  protocol=protocol, progress=False)
    estimator.save(folder)
    return estimator.detector_, float(estimator.detector_.config["training"]["seconds"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The table for ``args`` (``pack``, ``bootstrap``, ``random_state``, ``work``, ``layer``, ``json``, ``only``:
    the ``detectors`` command's options)."""
    import much_dataset
    from much_dataset import schema
    from much_dataset.internals import load_internals
    from much_metric.baselines import resolve, token_arrays
    from much_metric.learned import make_folds, row_info
    from much_metric.scoring import Bootstrap, compare, score

    pack_path, n_resamples, random_state, work, layer, out_json, only = (
        args.pack, args.bootstrap, args.random_state, args.work, args.layer, args.json, args.only)
    pack = load_internals(pack_path)
    data = much_dataset.load("sample", split="test")
    data = data.select([i for i, gid in enumerate(data[schema.GENERATION_ID]) if gid in pack])
    pack.check(list(data[schema.GENERATION_ID]), [len(t) for t in data[schema.OUTPUT_TOKENS]])
    print(f"sample rows in the pack: {len(data)} (observer {Path(pack.manifest['model']).name}: a proxy observer, the "
          f"model whose probabilities the sample holds; hidden_layers {pack.manifest['hidden_layers']}, attention "
          f"window {pack.manifest.get('attention_window') or 0})")
    arrays = token_arrays(data)
    unsupervised = {TOKEN_LIKELIHOOD: arrays.split(resolve("token_likelihood").compute(arrays, {}, {})),
                    "RAUQ": arrays.split(resolve("rauq").compute(arrays, {"internals": pack}, {}))}
    bootstrap = Bootstrap(n_resamples=n_resamples, random_state=random_state)
    folds = make_folds(row_info(data), "leave-one-language-out", random_state=random_state, only=only)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    chosen: dict[str, str] = {}
    for fold in folds:
        language = fold.name.split("=")[-1]
        print(fold.describe(), flush=True)
        train, validation, test = (data.select(part.tolist()) for part in (fold.train, fold.validation, fold.test))
        protocol = {"name": "leave-one-language-out", "fold": fold.name, "data": "sample",
                    "internals": str(pack_path), "purged": dict(fold.purged)}
        methods = {name: [values[i] for i in fold.test] for name, values in unsupervised.items()}
        selection = {}
        for key, estimator in _estimators(random_state, layer).items():
            start = time.perf_counter()
            detector, seconds = _trained(estimator, work / key / language, (train, validation), pack, protocol)
            scores = detector.token_scores(test, pack if detector.kind.needs_internals else None)
            label = f"Linear probe (h[{detector.observer['hidden_layer']}])" if key == "probe" else {
                "claim_head": "Claim head", "linear": "Learned linear (probabilities)",
                "sequence": "Learned sequence (probabilities)"}[key]
            methods[label] = token_arrays(test).split(scores)
            selection[label] = detector.config["validation"]["roc_auc"]
            print(f"  {label}: fitted in {seconds:.1f}s (this step {time.perf_counter() - start:.1f}s), validation "
                  f"ROC-AUC {detector.config['validation']['roc_auc']:.3f}", flush=True)
        probability = [name for name in selection if name.endswith("(probabilities)")]
        best = max(probability, key=lambda name: selection[name])
        methods[BEST] = methods[best]
        chosen[language] = best
        chunks, labels, mask = test[schema.TOKEN_CHUNKS], test[schema.LABELS], test[schema.STOPWORD_MASK]
        for name, scores in methods.items():
            result = score(scores, chunks, labels, mask, aggregation="product", bootstrap=bootstrap)
            entry = {"roc_auc": result.roc_auc, "interval": list(result.intervals["roc_auc"]),
                     "n_claims": result.n_claims, "n_test_rows": len(fold.test), "n_train_rows": len(fold.train),
                     "n_validation_rows": len(fold.validation), "n_purged": fold.n_purged}
            if name != TOKEN_LIKELIHOOD:
                paired = compare(scores, methods[TOKEN_LIKELIHOOD], chunks, labels, mask, aggregation="product",
                                 bootstrap=bootstrap)
                entry["p_vs_token_likelihood"] = paired["roc_auc"]["p_value"]
            results.setdefault(name, {})[language] = entry
    _print(results, n_resamples, chosen)
    if out_json:
        Path(out_json).write_text(json.dumps({"n_rows": len(data), "model": pack.manifest["model"],
                                              "results": results, "best_probability_only": chosen}, indent=1))
    return results


def _print(results: dict[str, dict[str, dict[str, Any]]], n_resamples: int, chosen: dict[str, str]) -> None:
    languages = sorted({lang for per in results.values() for lang in per})
    print(f"\nROC-AUC on the held-out language (leave-one-language-out, article-grouped; product aggregator; 95% "
          f"bootstrap interval over samples, {n_resamples} resamples; p: paired bootstrap p-value against Token "
          "Likelihood on the same claims):")
    print(f"{'method':<52}" + "".join(f"{lang:>32}" for lang in languages))
    for name, per in results.items():
        cells = []
        for lang in languages:
            entry = per.get(lang)
            if entry is None:
                cells.append(f"{'':>32}")
                continue
            cell = f"{entry['roc_auc']:.3f} [{entry['interval'][0]:.3f},{entry['interval'][1]:.3f}]"
            if "p_vs_token_likelihood" in entry:
                cell += f" p={entry['p_vs_token_likelihood']:.3f}"
            cells.append(f"{cell:>32}")
        print(f"{name:<52}" + "".join(cells))
    first = next(iter(results.values()))
    print("\nrows per fold (test / train / validation / purged from the pool): "
          + ", ".join(f"{lang}: {first[lang]['n_test_rows']} / {first[lang]['n_train_rows']} / "
                      f"{first[lang]['n_validation_rows']} / {first[lang]['n_purged']}" for lang in languages))
    print("claims per held-out language: " + ", ".join(f"{lang}: {first[lang]['n_claims']}" for lang in languages))
    print(f"{BEST}: " + ", ".join(f"{lang}: {kind}" for lang, kind in chosen.items()))
