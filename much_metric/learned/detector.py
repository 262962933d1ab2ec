"""A trained detector as a folder, and its token scores.

Folder layout (no pickle anywhere; :func:`load_detector` reads only JSON and safetensors)::

    DIR/config.json          format, version, detector kind, inputs (feature names), aggregator, stopword rule,
                             protocol and fold, training-data fingerprint, hyper-parameters, validation numbers
    DIR/weights.safetensors  the parameters and the input standardisation (``input_mean``, ``input_std``)
    DIR/card.md              a short human-readable card with the validation numbers
    DIR/checkpoint/          training state, one per epoch (resumable; not needed to score)

:meth:`Detector.token_scores` gives one score per output token, higher = more uncertain (``sigmoid`` of the token
logit, in (0, 1)), the input of the metric's aggregator like any baseline's token scores. The linear detector
scores with numpy only; the sequence detector needs torch (extra ``learned``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT", "FORMAT_VERSION", "KINDS", "Detector", "load_detector", "fingerprint"]

FORMAT = "much-learned-detector"
FORMAT_VERSION = 1
#: Detector kind -> the function of the data giving its inputs (names of :mod:`much_metric.learned.features`).
KINDS = {"linear": "token_features", "sequence": "sequence_inputs"}
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.safetensors"
CARD_FILE = "card.md"


def inputs_of(kind: str, data: Any) -> np.ndarray:
    """The detector kind's per-token inputs of ``data``, shape ``(N_tokens, D)``."""
    from much_metric.learned import features

    if kind not in KINDS:
        raise ValueError(f"detector must be one of {sorted(KINDS)}, got {kind!r}")
    return getattr(features, KINDS[kind])(data)


def input_names(kind: str) -> tuple[str, ...]:
    from much_metric.learned.features import FEATURES, SEQUENCE_INPUTS

    return FEATURES if kind == "linear" else SEQUENCE_INPUTS


def fingerprint(generation_ids: list[str], inputs: np.ndarray, target: np.ndarray) -> str:
    """sha256 of the training rows' ids, inputs and claim labels: the same data gives the same fingerprint."""
    digest = hashlib.sha256()
    digest.update("\n".join(generation_ids).encode("utf-8"))
    digest.update(np.ascontiguousarray(inputs, dtype=np.float32).tobytes())
    digest.update(np.ascontiguousarray(target, dtype=np.float32).tobytes())
    return digest.hexdigest()


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # = 1 / (1 + exp(-z)), without overflow


@dataclass
class Detector:
    """A trained detector: its config (see the module docstring) and weights (name -> float32 array)."""

    config: dict[str, Any]
    weights: dict[str, np.ndarray]
    folder: Path | None = None
    _module: Any = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return str(self.config["detector"])

    def _standardised(self, data: Any) -> tuple[np.ndarray, Any]:
        from much_metric.baselines import token_arrays

        arrays = token_arrays(data)
        inputs = inputs_of(self.kind, arrays)
        return ((inputs - self.weights["input_mean"]) / self.weights["input_std"]).astype(np.float32), arrays

    def token_logits(self, data: Any) -> np.ndarray:
        """Flat token logits ``(N_tokens,)`` of a split (any input of :func:`much_metric.baselines.token_arrays`)."""
        inputs, arrays = self._standardised(data)
        if self.kind == "linear":
            return inputs.astype(np.float64) @ self.weights["linear.weight"][0].astype(np.float64) \
                + float(self.weights["linear.bias"][0])
        return self._sequence_logits(inputs, arrays.offsets)

    def token_scores(self, data: Any) -> np.ndarray:
        """Flat token uncertainties in (0, 1), shape ``(N_tokens,)``; higher = more likely hallucinated."""
        return _sigmoid(self.token_logits(data))

    def _sequence_logits(self, inputs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        import torch

        from much_metric.learned import _data, _torch

        if self._module is None:
            module = _torch.build("sequence", inputs.shape[1], seed=0, hidden=int(self.config["hidden"]))
            module.load_state_dict({k: torch.from_numpy(v) for k, v in self.weights.items()
                                    if not k.startswith("input_")})
            self._module = module.eval()
        prepared = _data.Prepared(inputs, offsets, np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64),
                                  None, np.zeros(0, np.float32), [])
        out = np.empty(len(inputs), dtype=np.float64)
        for samples in _data.batches(prepared, batch_size=64, rng=None):
            flat = _torch.token_logits(self._module, _data.batch(prepared, samples))
            out[_data.concatenated_ranges(offsets[samples], offsets[samples + 1] - offsets[samples])] = flat
        return out

    def save(self, folder: str | Path, *, card: str | None = None) -> Path:
        """Write ``config.json``, ``weights.safetensors`` and ``card.md`` into ``folder`` (atomically each)."""
        from safetensors.numpy import save

        from much_metric.fileio import atomic_write_bytes, atomic_write_text

        folder = Path(folder)
        atomic_write_bytes(folder / WEIGHTS_FILE, save({k: np.ascontiguousarray(v, dtype=np.float32)
                                                        for k, v in self.weights.items()}))
        atomic_write_text(folder / CONFIG_FILE, json.dumps(self.config, indent=2, sort_keys=True) + "\n")
        if card is not None:
            atomic_write_text(folder / CARD_FILE, card)
        self.folder = folder
        return folder


def load_detector(folder: str | Path) -> Detector:
    """Read a detector folder (JSON + safetensors only; raises ``ValueError`` naming the file when it is not one)."""
    from safetensors.numpy import load

    folder = Path(folder)
    config_path, weights_path = folder / CONFIG_FILE, folder / WEIGHTS_FILE
    if not config_path.is_file() or not weights_path.is_file():
        raise FileNotFoundError(f"{folder} is not a learned detector folder: expected {CONFIG_FILE} and "
                                f"{WEIGHTS_FILE} (written by `much train`)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{config_path}: not valid JSON ({error})") from error
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ValueError(f"{config_path}: 'format' must be {FORMAT!r}")
    if config.get("version") != FORMAT_VERSION:
        raise ValueError(f"{config_path}: format version {config.get('version')!r}, this toolkit reads "
                         f"{FORMAT_VERSION}")
    kind = config.get("detector")
    if kind not in KINDS:
        raise ValueError(f"{config_path}: 'detector' must be one of {sorted(KINDS)}, got {kind!r}")
    if list(config.get("inputs", [])) != list(input_names(kind)):
        raise ValueError(f"{config_path}: 'inputs' differ from this toolkit's {kind} inputs; retrain the detector")
    try:
        weights = load(weights_path.read_bytes())
    except Exception as error:  # noqa: BLE001 - safetensors raises its own error type for a corrupt file
        raise ValueError(f"{weights_path}: not a readable safetensors file ({error})") from error
    n_inputs = len(config["inputs"])
    for name in ("input_mean", "input_std"):
        if name not in weights or weights[name].shape != (n_inputs,):
            raise ValueError(f"{weights_path}: {name!r} missing or not of shape ({n_inputs},)")
    if kind == "linear" and (weights.get("linear.weight") is None or weights["linear.weight"].shape != (1, n_inputs)):
        raise ValueError(f"{weights_path}: 'linear.weight' missing or not of shape (1, {n_inputs})")
    return Detector(config, weights, folder)
