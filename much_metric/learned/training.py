"""Training a detector on claim labels: Adam on the claim-level loss, early stopping, one checkpoint per epoch.

:func:`train_detector` fits a ``linear`` or ``sequence`` detector (:mod:`much_metric.learned._torch`) on a training
part, stops when the validation loss has not improved for ``patience`` epochs, and writes the detector folder
(:mod:`much_metric.learned.detector`) with the best epoch's weights. The loss is the binary cross-entropy of the
claim uncertainties -- the metric's own aggregator over the token scores -- against the claim labels (hallucinated
= 1), with the metric's stopword rule.

Kill-safe: after every epoch ``DIR/checkpoint/state.safetensors`` (weights, best weights, Adam moments) and
``DIR/checkpoint/state.json`` (epoch, best epoch, losses, settings) are replaced atomically. Running the same call
again resumes after the last finished epoch and gives the same detector as an uninterrupted run (batches are
shuffled with a generator seeded by ``(seed, epoch)``); a checkpoint written with other settings or other training
data is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.learned.detector import FORMAT, FORMAT_VERSION, KINDS, Detector, fingerprint, input_names, inputs_of

__all__ = ["train_detector", "DEFAULTS"]

#: Default hyper-parameters per detector kind.
DEFAULTS = {
    "linear": {"learning_rate": 0.02, "batch_size": 64, "max_epochs": 60, "patience": 5, "hidden": 0},
    "sequence": {"learning_rate": 0.005, "batch_size": 32, "max_epochs": 15, "patience": 3, "hidden": 32},
}
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
            loss = _torch.claim_loss(model(torch.from_numpy(part.inputs)), part, aggregator=aggregator,
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


def _load_state(folder: Path, model, optimizer) -> tuple[dict[str, Any], dict[str, Any]]:
    from safetensors.torch import load

    tensors = load((folder / _STATE_WEIGHTS).read_bytes())
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    best = {k[len("best."):]: v for k, v in tensors.items() if k.startswith("best.")}
    saved = optimizer.state_dict()
    moments: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("adam."):
            _, index, name = key.split(".", 2)
            moments.setdefault(int(index), {})[name] = value
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for index, entry in moments.items():
        entry["exp_avg"] = entry["exp_avg"].reshape(params[index].shape)
        entry["exp_avg_sq"] = entry["exp_avg_sq"].reshape(params[index].shape)
        entry["step"] = entry["step"].reshape(())
    optimizer.load_state_dict({"state": moments, "param_groups": saved["param_groups"]})
    return json.loads((folder / _STATE_JSON).read_text(encoding="utf-8")), best


def train_detector(
    train: Any,
    validation: Any,
    out: str | Path,
    *,
    detector: str = "linear",
    aggregator: str = "product",
    stopword_handling: str = "null",
    seed: int = 0,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    max_epochs: int | None = None,
    patience: int | None = None,
    hidden: int | None = None,
    protocol: dict[str, Any] | None = None,
    progress: bool = True,
    on_epoch: Callable[[int, dict[str, Any]], None] | None = None,
) -> Detector:
    """Train a detector and write its folder to ``out``; resume from ``out/checkpoint`` if present.

    Parameters
    ----------
    train, validation : datasets.Dataset or list of rows
        MUCH rows (token arrays, ``token_chunks``, ``labels``, optional ``stopword_mask``); make them with
        :func:`much_metric.learned.make_folds` so that no question or generation is in both.
    out : path
        The detector folder.
    detector : {"linear", "sequence"}
    aggregator : one of :data:`much_metric.scoring.AGGREGATORS`, default "product"
        Claim score used in the loss and recorded in the config (score the detector with the same one).
    stopword_handling : {"null", "exclude"}, default "null"
    seed : int
        Parameter initialisation and batch order.
    learning_rate, batch_size, max_epochs, patience, hidden : optional
        Override :data:`DEFAULTS` of the kind (``hidden``: the GRU's state size).
    protocol : dict, optional
        Recorded in the config (protocol name, fold, data source).
    on_epoch : callable, optional
        ``on_epoch(epoch, state)`` after each saved checkpoint (tests use it to simulate a kill).
    """
    import torch
    from tqdm.auto import tqdm

    from much_metric.learned import _data, _torch
    from much_metric.scoring import AGGREGATORS

    if detector not in KINDS:
        raise ValueError(f"detector must be one of {sorted(KINDS)}, got {detector!r}")
    if aggregator not in AGGREGATORS:
        raise ValueError(f"aggregator must be one of {AGGREGATORS}, got {aggregator!r}")
    if stopword_handling not in ("null", "exclude"):
        raise ValueError(f"stopword_handling must be 'null' or 'exclude', got {stopword_handling!r}")
    settings = {**DEFAULTS[detector], **{k: v for k, v in {"learning_rate": learning_rate, "batch_size": batch_size,
                                                           "max_epochs": max_epochs, "patience": patience,
                                                           "hidden": hidden}.items() if v is not None}}
    for key in ("batch_size", "max_epochs", "patience"):
        if isinstance(settings[key], bool) or not isinstance(settings[key], int) or settings[key] < 1:
            raise ValueError(f"{key} must be a positive integer, got {settings[key]!r}")
    if not settings["learning_rate"] > 0:
        raise ValueError(f"learning_rate must be > 0, got {settings['learning_rate']!r}")
    out = Path(out)
    train_inputs = inputs_of(detector, train)
    mean, std = _data.standardisation(train_inputs)
    train_data = _data.prepare(train, train_inputs, mean, std)
    validation_data = _data.prepare(validation, inputs_of(detector, validation), mean, std)
    if not len(train_data.target) or not len(validation_data.target):
        raise ValueError("the training and the validation part need at least one labelled claim each")
    run = {"detector": detector, "aggregator": aggregator, "stopword_handling": stopword_handling, "seed": seed,
           **settings,
           "train_fingerprint": fingerprint(train_data.generation_ids, train_inputs, train_data.target),
           "validation_ids": fingerprint(validation_data.generation_ids, np.zeros(0), validation_data.target)}
    model = _torch.build(detector, train_inputs.shape[1], seed=seed, hidden=settings["hidden"] or 32)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings["learning_rate"])
    checkpoint = out / "checkpoint"
    state: dict[str, Any] = {"run": run, "epoch": 0, "best_epoch": 0, "best_loss": None, "bad_epochs": 0,
                             "history": [], "seconds": 0.0, "finished": False}
    best = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if (checkpoint / _STATE_JSON).is_file():
        saved = json.loads((checkpoint / _STATE_JSON).read_text(encoding="utf-8"))
        if saved.get("run") != run:
            changed = sorted(k for k in run if saved.get("run", {}).get(k) != run[k])
            raise ValueError(f"{checkpoint} holds a run with other settings or data ({', '.join(changed)}); "
                             "use another output folder or delete it")
        state, best = _load_state(checkpoint, model, optimizer)
    bar = tqdm(total=settings["max_epochs"], initial=state["epoch"], desc=f"train {detector}", unit="epoch",
               disable=not progress)
    while not state["finished"]:
        epoch = state["epoch"] + 1
        start = time.perf_counter()
        model.train()
        rng = np.random.default_rng([seed, epoch])
        train_loss, count = 0.0, 0
        for samples in _data.batches(train_data, batch_size=settings["batch_size"], rng=rng):
            part = _data.batch(train_data, samples)
            if not len(part.target):
                continue
            optimizer.zero_grad()
            loss = _torch.claim_loss(model(torch.from_numpy(part.inputs)), part, aggregator=aggregator,
                                     stopword_handling=stopword_handling)
            loss.backward()
            optimizer.step()
            train_loss += float(loss.detach()) * len(part.target)
            count += len(part.target)
        model.eval()
        validation_loss = _evaluate_loss(model, validation_data, aggregator=aggregator,
                                         stopword_handling=stopword_handling,
                                         batch_size=max(settings["batch_size"], 64))
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
        _save_state(checkpoint, model, best, optimizer, state)
        bar.update(1)
        bar.set_postfix(validation_loss=f"{validation_loss:.4f}")
        if on_epoch is not None:
            on_epoch(epoch, state)
    bar.close()
    weights = {k: v.numpy() for k, v in best.items()}
    weights.update({"input_mean": mean, "input_std": std})
    config = {"format": FORMAT, "version": FORMAT_VERSION, "detector": detector, "inputs": list(input_names(detector)),
              "aggregator": aggregator, "stopword_handling": stopword_handling, "hidden": settings["hidden"],
              "seed": seed,
              "hyperparameters": settings, "protocol": protocol or {},
              "training_data": {"fingerprint": run["train_fingerprint"], "n_samples": train_data.n_samples,
                                "n_claims": int(len(train_data.target)),
                                "n_validation_samples": validation_data.n_samples},
              "training": {"epochs": state["epoch"], "best_epoch": state["best_epoch"],
                           "best_validation_loss": state["best_loss"], "seconds": state["seconds"]}}
    from much_dataset._version import __version__

    config["toolkit_version"] = __version__
    result = Detector(config, weights)
    config["validation"] = _validation_metrics(result, validation, aggregator=aggregator,
                                               stopword_handling=stopword_handling)
    result.save(out, card=_card(config, state["history"]))
    return result


def _validation_metrics(detector: Detector, validation: Any, *, aggregator: str,
                        stopword_handling: str) -> dict[str, Any]:
    from much_metric.baselines import token_arrays
    from much_metric.learned._data import column
    from much_metric.scoring import score

    arrays = token_arrays(validation)
    masks = column(validation, "stopword_mask")
    result = score(arrays.split(detector.token_scores(arrays)), column(validation, "token_chunks"),
                   column(validation, "labels"), masks if masks and all(m is not None for m in masks) else None,
                   aggregator=aggregator, stopword_handling=stopword_handling)
    values = result.to_dict()
    return {key: values[key] for key in ("roc_auc", "pr_auc", "n_claims", "n_hallucinated")}


def _card(config: dict[str, Any], history: list[dict[str, Any]]) -> str:
    validation = config["validation"]
    protocol = config["protocol"] or {}
    lines = [
        f"# Learned detector: {config['detector']}",
        "",
        f"- protocol: {protocol.get('name', 'not recorded')} ({protocol.get('fold', '')}), data "
        f"{protocol.get('data', 'not recorded')}",
        f"- inputs: {', '.join(config['inputs'])}",
        f"- claim aggregator: {config['aggregator']}, stopword handling: {config['stopword_handling']}",
        f"- training data: {config['training_data']['n_samples']} samples, {config['training_data']['n_claims']} "
        f"claims, fingerprint sha256:{config['training_data']['fingerprint'][:16]}",
        f"- training: {config['training']['epochs']} epochs (best {config['training']['best_epoch']}), seed "
        f"{config['seed']}, {config['training']['seconds']:.1f} s",
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
