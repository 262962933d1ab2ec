"""Training a detector on claim labels: Adam on the claim-level loss, early stopping, one checkpoint per epoch.

:func:`fit_detector` (called by :meth:`LinearDetector.fit <much_metric.learned.LinearDetector.fit>` and
:meth:`SequenceDetector.fit <much_metric.learned.SequenceDetector.fit>`) fits a detector kind
(:mod:`much_metric.learned._kinds`) on a training part, stops when the validation loss has not improved for
``patience`` epochs, and returns the :class:`~much_metric.learned.detector.Detector` with the best epoch's weights and
the exact rows it was trained and validated on. The loss is the binary cross-entropy of the claim uncertainties --
the metric's own aggregator over the token scores -- against the claim labels (hallucinated = 1), with the metric's
stopword rule.

Kill-safe with a ``checkpoint`` folder: after every epoch ``state.safetensors`` (weights, best weights, Adam moments)
and ``state.json`` (epoch, best epoch, losses, settings) are replaced atomically. Fitting again with the same
folder resumes after the last finished epoch and gives the same detector as an uninterrupted run (batches are
shuffled with a generator seeded by ``(random_state, epoch)``). A checkpoint written with other settings or other
training data is refused, and so is one that does not verify (unreadable, truncated, parameters of other names or
shapes, non-finite values): resuming only ever starts from a state this code wrote. A loss that stops being finite
(a learning rate far too large) stops the fit with an error naming the epoch.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.learned._kinds import Kind
from much_metric.learned.detector import FORMAT, FORMAT_VERSION, Detector, fingerprint, rows_digest

__all__ = ["fit_detector"]

_STATE_JSON, _STATE_WEIGHTS = "state.json", "state.safetensors"


def _evaluate_loss(model, data, *, aggregator: str, stopword_handling: str, batch_size: int) -> float:
    import torch

    from much_metric.learned import _data, _torch

    total, count = 0.0, 0
    with torch.no_grad():
        for samples in _data.batches(data, batch_size=batch_size, rng=None):
            part = _data.batch(data, samples)
            if not len(part.target):
                continue
            loss = _torch.claim_loss(_torch.forward(model, part), part, aggregator=aggregator,
                                     stopword_handling=stopword_handling)
            total += float(loss) * len(part.target)
            count += len(part.target)
    return total / max(count, 1)


def _save_state(folder: Path, model, best: dict[str, Any], optimizer, state: dict[str, Any]) -> None:
    from safetensors.torch import save

    from much_metric.fileio import atomic_write_bytes, atomic_write_text

    tensors = {f"model.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    tensors.update({f"best.{k}": v.clone().contiguous() for k, v in best.items()})
    for index, moments in optimizer.state_dict()["state"].items():
        for key, value in moments.items():
            tensors[f"adam.{index}.{key}"] = value.detach().clone().reshape(-1).contiguous()
    atomic_write_bytes(folder / _STATE_WEIGHTS, save(tensors))
    atomic_write_text(folder / _STATE_JSON, json.dumps(state, indent=2, sort_keys=True) + "\n")


def _verified_state(folder: Path, model, optimizer) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load the checkpoint into ``model`` and ``optimizer`` after checking every tensor's name, shape and
    finiteness; ``ValueError`` naming the checkpoint when it does not verify (nothing is loaded then)."""
    import torch
    from safetensors.torch import load

    def refuse(reason: str) -> ValueError:
        return ValueError(f"{folder}: the checkpoint does not verify ({reason}); delete {folder} to train from the "
                          "start, or use another output folder")

    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    expected = {**{f"model.{k}": s for k, s in shapes.items()}, **{f"best.{k}": s for k, s in shapes.items()}}
    for index, parameter in enumerate(params):
        size = int(np.prod(parameter.shape)) if parameter.dim() else 1
        expected.update({f"adam.{index}.exp_avg": (size,), f"adam.{index}.exp_avg_sq": (size,),
                         f"adam.{index}.step": (1,)})
    path = folder / _STATE_WEIGHTS
    if not path.is_file():
        raise refuse(f"{_STATE_WEIGHTS} is missing or not a regular file")
    limit = 4 * sum(int(np.prod(s)) for s in expected.values()) + (1 << 16)
    if path.stat().st_size > limit:
        raise refuse(f"{_STATE_WEIGHTS} has {path.stat().st_size:,} bytes, more than this model's state needs")
    try:
        tensors = load(path.read_bytes())
        state = json.loads((folder / _STATE_JSON).read_text(encoding="utf-8"))
    except Exception as error:  # noqa: BLE001 - safetensors/JSON raise their own error types for a corrupt file
        raise refuse(f"{type(error).__name__}: {error}") from error
    if set(tensors) != set(expected):
        name = sorted(set(tensors) ^ set(expected))[0]
        raise refuse(f"tensor {name!r} is {'missing' if name in expected else 'unexpected'}")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape or not torch.isfinite(tensors[name]).all():
            raise refuse(f"tensor {name!r} has shape {tuple(tensors[name].shape)} (expected {shape}) or non-finite "
                         "values")
    if not isinstance(state, dict) or not {"run", "epoch", "history", "finished"} <= set(state):
        raise refuse(f"{_STATE_JSON} lacks the training state")
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    best = {k[len("best."):]: v for k, v in tensors.items() if k.startswith("best.")}
    moments = {index: {"exp_avg": tensors[f"adam.{index}.exp_avg"].reshape(parameter.shape),
                       "exp_avg_sq": tensors[f"adam.{index}.exp_avg_sq"].reshape(parameter.shape),
                       "step": tensors[f"adam.{index}.step"].reshape(())}
               for index, parameter in enumerate(params)}
    optimizer.load_state_dict({"state": moments, "param_groups": optimizer.state_dict()["param_groups"]})
    return state, best


def _read_run(folder: Path) -> dict[str, Any] | None:
    """The settings recorded in a checkpoint's ``state.json`` (None when there is no checkpoint)."""
    path = folder / _STATE_JSON
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and path.stat().st_size < 1 << 24 \
            else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        saved = None
    if not isinstance(saved, dict) or not isinstance(saved.get("run"), dict):
        raise ValueError(f"{folder}: the checkpoint does not verify ({_STATE_JSON} is not a training state); delete "
                         f"{folder} to train from the start, or use another output folder")
    return saved["run"]


def _context(kind: Kind, settings: dict[str, Any], internals: Any) -> Any:
    """The :class:`~much_metric.learned.internals.Observed` pack of a kind that reads one (None otherwise)."""
    from much_metric.learned import internals as observed

    if not kind.needs_internals:
        if internals is not None:
            raise ValueError(f"a {kind.name} detector reads no internals pack (internals= is for the probe and "
                             "claim_head detectors)")
        return None
    if internals is None:
        raise ValueError(f"a {kind.name} detector reads an internals pack: pass internals=PACK (much train "
                         "--internals PACK)")
    pack = observed.open_pack(internals)
    record = observed.observer_record(pack, layer=settings.get("layer"),
                                      attention_window=settings.get("attention_window"), reads=kind.reads)
    return observed.Observed(pack, record)


def _parts(kind: Kind, train: Any, validation: Any, context: Any) -> tuple[Any, ...]:
    """Raw training inputs, their standardisation, and both parts prepared (claims laid out as the metric)."""
    from much_metric.baselines import token_arrays
    from much_metric.learned import _data
    from much_metric.learned.internals import claim_segments

    train_arrays, validation_arrays = token_arrays(train), token_arrays(validation)
    train_inputs = kind.inputs(train_arrays, context)
    mean, std = _data.standardisation(train_inputs)
    prepared = [_data.prepare(part, inputs, mean, std, claim_segments(arrays) if kind.segmented else None)
                for part, arrays, inputs in ((train, train_arrays, train_inputs),
                                             (validation, validation_arrays, kind.inputs(validation_arrays, context)))]
    if not len(prepared[0].target) or not len(prepared[1].target):
        raise ValueError("the training and the validation part need at least one labelled claim each")
    shared = set(prepared[0].generation_ids) & set(prepared[1].generation_ids)
    if shared:
        raise ValueError(f"generation_id {sorted(shared)[0]!r} is in both the training and the validation part "
                         f"({len(shared)} shared)")
    return train_inputs, mean, std, prepared[0], prepared[1]


def _detector(kind: Kind, settings: dict[str, Any], fitted: tuple[dict[str, np.ndarray], dict[str, Any]],
              parts: tuple[Any, ...], context: Any) -> Detector:
    """The fitted :class:`Detector` of ``fitted`` = (weights, training record): config (with the observer record of
    a pack), weights, the exact rows."""
    from much_dataset._version import __version__

    weights, training = fitted
    train_inputs, mean, std, train_data, validation_data = parts
    weights = {**weights, "input_mean": mean, "input_std": std}
    config = {"format": FORMAT, "version": FORMAT_VERSION, "detector": kind.name,
              "inputs": list(kind.names(None if context is None else context.observer)),
              "aggregator": settings["aggregator"], "stopword_handling": settings["stopword_handling"],
              "random_state": settings["random_state"],
              "hyperparameters": {key: settings[key] for key in kind.hyperparameters}, "protocol": {},
              "training_data": {"fingerprint": fingerprint(train_data.generation_ids, train_inputs, train_data.target),
                                "n_samples": train_data.n_samples, "n_claims": int(len(train_data.target)),
                                "n_validation_samples": validation_data.n_samples},
              "training": training, "toolkit_version": __version__}
    if context is not None:
        config["internals"] = dict(context.observer)
    rows = {"train": sorted(set(train_data.generation_ids)), "validation": sorted(set(validation_data.generation_ids))}
    config["training_data"]["rows_sha256"] = rows_digest(rows)
    return Detector(config, weights, rows)


def _fit_token_probe(kind: Kind, settings: dict[str, Any], train: Any, validation: Any,
                     context: Any) -> tuple[Detector, list[dict]]:
    """The probe: scikit-learn's L2 logistic regression on standardised inputs, one example per token of a labelled
    claim (its claim's label; stopwords and the last chunk left out: :func:`~much_metric.learned.probes.token_targets`),
    stored as ``linear.weight``/``linear.bias`` with the standardisation, so the token logit is its
    ``decision_function``."""
    from sklearn.linear_model import LogisticRegression

    from much_metric.learned._data import standardisation
    from much_metric.learned.probes import row_targets

    train_inputs, _, _, train_data, validation_data = _parts(kind, train, validation, context)
    targets = np.concatenate(row_targets(train, range(train_data.n_samples)))
    keep = targets >= 0
    if len(np.unique(targets[keep])) < 2:
        raise ValueError("a probe needs training tokens of both classes (hallucinated and correct claims)")
    start = time.perf_counter()
    mean, std = standardisation(train_inputs[keep])  # as StandardScaler on the training examples
    model = LogisticRegression(C=settings["C"], max_iter=settings["max_iter"], class_weight=settings["class_weight"],
                               random_state=settings["random_state"])
    model.fit((train_inputs[keep] - mean) / std, targets[keep])
    parts = (train_inputs, mean, std, train_data, validation_data)
    weights = {"linear.weight": model.coef_.astype(np.float32), "linear.bias": model.intercept_.astype(np.float32)}
    training = {"epochs": int(np.max(model.n_iter_)), "best_epoch": int(np.max(model.n_iter_)),
                "best_validation_loss": None, "seconds": time.perf_counter() - start,
                "n_training_tokens": int(keep.sum())}
    detector = _detector(kind, settings, (weights, training), parts, context)
    detector.config["validation"] = _validation_metrics(detector, validation, settings, context)
    return detector, []


def fit_detector(kind: Kind, settings: dict[str, Any], train: Any, validation: Any, *,
                 checkpoint: str | Path | None = None, progress: bool = True,
                 internals: Any = None) -> tuple[Detector, list[dict]]:
    """Fit a detector of ``kind`` with the estimator's checked ``settings`` (hyper-parameters, ``aggregator``,
    ``stopword_handling``, ``random_state``); returns the detector and the per-epoch loss history.

    ``train`` / ``validation``: MUCH rows (token arrays, ``token_chunks``, ``labels``, optional ``stopword_mask``,
    ``generation_id``); ``checkpoint``: folder of the per-epoch state (resumable), None for none; ``internals``: the
    internals pack a probe or a claim head reads (path or pack)."""
    settings = {**kind.fixed, **settings}
    context = _context(kind, settings, internals)
    if kind.trainer == "tokens":
        return _fit_token_probe(kind, settings, train, validation, context)
    import torch
    from tqdm.auto import tqdm

    from much_metric.learned import _data, _torch

    aggregator, stopwords, random_state = settings["aggregator"], settings["stopword_handling"], \
        settings["random_state"]
    parts = _parts(kind, train, validation, context)
    train_inputs, _, _, train_data, validation_data = parts
    run = {"detector": kind.name, **settings,
           "train_fingerprint": fingerprint(train_data.generation_ids, train_inputs, train_data.target),
           "validation_ids": fingerprint(validation_data.generation_ids, np.zeros(0), validation_data.target)}
    model = _torch.build(kind, train_inputs.shape[1], random_state=random_state, hyper=settings)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings["learning_rate"])
    state: dict[str, Any] = {"run": run, "epoch": 0, "best_epoch": 0, "best_loss": None, "bad_epochs": 0,
                             "history": [], "seconds": 0.0, "finished": False}
    best = {k: v.detach().clone() for k, v in model.state_dict().items()}
    folder = None if checkpoint is None else Path(checkpoint)
    if folder is not None:
        saved_run = _read_run(folder)
        if saved_run is not None:
            if saved_run != run:
                changed = sorted(k for k in run if saved_run.get(k) != run[k])
                raise ValueError(f"{folder} holds a run with other settings or data ({', '.join(changed)}); "
                                 "use another output folder or delete it")
            state, best = _verified_state(folder, model, optimizer)
    bar = tqdm(total=settings["max_epochs"], initial=state["epoch"], desc=f"train {kind.name}", unit="epoch",
               disable=not progress)
    while not state["finished"]:
        epoch = state["epoch"] + 1
        start = time.perf_counter()
        model.train()
        rng = np.random.default_rng([random_state, epoch])
        train_loss, count = 0.0, 0
        for samples in _data.batches(train_data, batch_size=settings["batch_size"], rng=rng):
            part = _data.batch(train_data, samples)
            if not len(part.target):
                continue
            optimizer.zero_grad()
            loss = _torch.claim_loss(_torch.forward(model, part), part, aggregator=aggregator,
                                     stopword_handling=stopwords)
            loss.backward()
            optimizer.step()
            train_loss += float(loss.detach()) * len(part.target)
            count += len(part.target)
        model.eval()
        validation_loss = _evaluate_loss(model, validation_data, aggregator=aggregator, stopword_handling=stopwords,
                                         batch_size=max(settings["batch_size"], 64))
        finite = all(torch.isfinite(v).all() for v in model.state_dict().values())
        if not (math.isfinite(train_loss) and math.isfinite(validation_loss) and finite):
            raise ValueError(f"training diverged at epoch {epoch}: the loss is {train_loss / max(count, 1):.4g} "
                             f"(validation {validation_loss:.4g}); lower learning_rate "
                             f"(now {settings['learning_rate']:g})")
        improved = state["best_loss"] is None or validation_loss < state["best_loss"] - 1e-6
        if improved:
            best = {k: v.detach().clone() for k, v in model.state_dict().items()}
        state = {**state, "epoch": epoch, "bad_epochs": 0 if improved else state["bad_epochs"] + 1,
                 "best_epoch": epoch if improved else state["best_epoch"],
                 "best_loss": validation_loss if improved else state["best_loss"],
                 "seconds": state["seconds"] + time.perf_counter() - start,
                 "history": [*state["history"], {"epoch": epoch, "train_loss": train_loss / max(count, 1),
                                                 "validation_loss": validation_loss}]}
        state["finished"] = state["bad_epochs"] >= settings["patience"] or epoch >= settings["max_epochs"]
        if folder is not None:
            _save_state(folder, model, best, optimizer, state)
        bar.update(1)
        bar.set_postfix(validation_loss=f"{validation_loss:.4f}")
    bar.close()
    training = {"epochs": state["epoch"], "best_epoch": state["best_epoch"], "best_validation_loss": state["best_loss"],
                "seconds": state["seconds"]}
    result = _detector(kind, settings, ({k: v.numpy() for k, v in best.items()}, training), parts, context)
    result.config["validation"] = _validation_metrics(result, validation, settings, context)
    return result, state["history"]


def _validation_metrics(detector: Detector, validation: Any, settings: dict[str, Any],
                        context: Any) -> dict[str, Any]:
    from much_metric.baselines import token_arrays
    from much_metric.learned._data import column
    from much_metric.scoring import Aggregation, score

    arrays = token_arrays(validation)
    masks = column(validation, "stopword_mask")
    scores = detector.token_scores(arrays, None if context is None else context.pack)
    result = score(arrays.split(scores), column(validation, "token_chunks"),
                   column(validation, "labels"), masks if masks and all(m is not None for m in masks) else None,
                   aggregation=Aggregation(aggregator=settings["aggregator"],
                                           stopword_handling=settings["stopword_handling"]))
    values = result.to_dict()
    return {key: values[key] for key in ("roc_auc", "pr_auc", "n_claims", "n_hallucinated")}


def card(config: dict[str, Any], history: list[dict[str, Any]]) -> str:
    """The ``card.md`` text of a detector's config and loss history."""
    validation = config["validation"]
    protocol = config["protocol"] or {}
    purged = protocol.get("purged") or {}
    lines = [
        f"# Learned detector: {config['detector']}",
        "",
        f"- protocol: {protocol.get('name', 'not recorded')} ({protocol.get('fold', '')}), data "
        f"{protocol.get('data', 'not recorded')}"
        + (f"; purged from training: {', '.join(f'{n} ({key})' for key, n in purged.items() if n)}"
           if any(purged.values()) else ""),
        f"- inputs: {', '.join(config['inputs'])}",
        f"- claim aggregator: {config['aggregator']}, stopword handling: {config['stopword_handling']}",
        f"- training data: {config['training_data']['n_samples']} samples, {config['training_data']['n_claims']} "
        f"claims, fingerprint sha256:{config['training_data']['fingerprint'][:16]}; the exact rows are in "
        "training_rows.json (left out when the detector is scored)",
        f"- training: {config['training']['epochs']} epochs (best {config['training']['best_epoch']}), "
        f"random_state {config['random_state']}, {config['training']['seconds']:.1f} s",
        f"- validation ({validation.get('n_claims')} claims, {validation.get('n_hallucinated')} hallucinated): "
        f"ROC-AUC {validation.get('roc_auc', float('nan')):.4f}, PR-AUC {validation.get('pr_auc', float('nan')):.4f}",
        "",
        "Token scores are sigmoid outputs in (0, 1), higher = more uncertain; score it with "
        f"`much run --signals learned:DIR --aggregator {config['aggregator']}`.",
        "",
        "| epoch | train loss | validation loss |",
        "|---|---|---|",
        *(f"| {h['epoch']} | {h['train_loss']:.4f} | {h['validation_loss']:.4f} |" for h in history),
    ]
    return "\n".join(lines) + "\n"
