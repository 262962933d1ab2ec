"""A trained detector as a folder, and its token scores.

Folder layout (no pickle anywhere; :func:`load_detector` reads only JSON and safetensors)::

    DIR/config.json          format, version, detector kind, inputs (feature names), aggregator, stopword rule,
                             protocol and fold, training-data fingerprint, hyper-parameters, validation numbers;
                             for a probe or claim head, "internals": the observer of the pack it was trained on
    DIR/weights.safetensors  the parameters and the input standardisation (``input_mean``, ``input_std``)
    DIR/training_rows.json   {"train": [generation_id, ...], "validation": [...]}: the exact rows that trained and
                             validated the detector (sorted); ``much run`` / ``much evaluate`` leave them out;
                             config.json records their number and digest (``training_data``: ``n_samples``,
                             ``n_validation_samples``, ``rows_sha256``), so a replaced or edited file is refused
    DIR/card.md              a short human-readable card with the validation numbers
    DIR/checkpoint/          training state, one per epoch (resumable; not needed to score)

:func:`load_detector` checks the whole folder before building anything (:func:`check_folder`): regular files of
bounded size, the config's fields and types (each hyper-parameter against its kind's constraint), every parameter's
exact name, dtype and shape for the kind (:class:`~much_metric.learned.Kind`), finite values, a positive
standardisation, the training rows. A folder that fails is a :class:`DetectorFolderError` naming the file and the
field.

:meth:`Detector.token_scores` gives one score per output token, higher = more uncertain (``sigmoid`` of the token
logit, in (0, 1)), the input of the metric's aggregator like any baseline's token scores. The linear detector and
the probe score with numpy only; the sequence detector and the claim head need torch (extra ``learned``); the probe
and the claim head read an internals pack of their observer model (``token_scores(data, internals=PACK)``).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.learned._kinds import KINDS, Kind, kind_of

__all__ = ["FORMAT", "FORMAT_VERSION", "Detector", "DetectorFolderError", "check_folder", "fingerprint",
           "load_detector", "rows_digest"]

FORMAT = "much-learned-detector"
FORMAT_VERSION = 2
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.safetensors"
TRAINING_ROWS_FILE = "training_rows.json"
CARD_FILE = "card.md"
#: Largest config.json / training_rows.json read (bytes).
MAX_CONFIG_BYTES = 1 << 20
MAX_ROWS_BYTES = 256 << 20
#: Room for the safetensors header beyond the parameters' float32 bytes.
_HEADER_BYTES = 1 << 16
_STOPWORDS = ("null", "exclude")


class DetectorFolderError(ValueError):
    """A detector folder that is not one this toolkit wrote (names the file and the field)."""


def fingerprint(generation_ids: list[str], inputs: np.ndarray, target: np.ndarray) -> str:
    """sha256 of the training rows' ids, inputs and claim labels: the same data gives the same fingerprint."""
    digest = hashlib.sha256()
    digest.update("\n".join(generation_ids).encode("utf-8"))
    digest.update(np.ascontiguousarray(inputs, dtype=np.float32).tobytes())
    digest.update(np.ascontiguousarray(target, dtype=np.float32).tobytes())
    return digest.hexdigest()


def rows_digest(rows: dict[str, list[str]]) -> str:
    """sha256 of a detector's training rows (``{"train", "validation"}``, sorted): what config.json records."""
    canonical = {part: sorted(rows[part]) for part in ("train", "validation")}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # = 1 / (1 + exp(-z)), without overflow


@dataclass
class Detector:
    """A trained detector: its config (see the module docstring), weights (name -> float32 array) and training rows
    (``{"train": [...], "validation": [...]}``, sorted generation_ids)."""

    config: dict[str, Any]
    weights: dict[str, np.ndarray]
    training_rows: dict[str, list[str]]
    folder: Path | None = None

    @property
    def kind(self) -> Kind:
        return kind_of(self.config["detector"])

    @property
    def hyperparameters(self) -> dict[str, Any]:
        """The folder's recorded hyper-parameters (a copy)."""
        return dict(self.config["hyperparameters"])

    @property
    def observer(self) -> dict[str, Any] | None:
        """The internals pack's observer record (``config["internals"]``) of a detector that reads a pack."""
        return self.config.get("internals")

    @property
    def training_generation_ids(self) -> list[str]:
        """Every row that trained or validated the detector, sorted."""
        return sorted({*self.training_rows["train"], *self.training_rows["validation"]})

    def signal_metadata(self) -> dict[str, Any]:
        """The metadata a signal file of this detector's scores carries (the contract with the leaderboard):
        ``training_generation_ids`` and ``detector`` = {kind, protocol, fold, aggregator, stopword_handling}."""
        protocol = self.config.get("protocol") or {}
        return {"training_generation_ids": self.training_generation_ids,
                "detector": {"kind": self.kind.name, "protocol": protocol.get("name"), "fold": protocol.get("fold"),
                             "aggregator": self.config["aggregator"],
                             "stopword_handling": self.config["stopword_handling"]}}

    def check_rows_of(self, generation_ids: Any, *, source: str) -> None:
        """Raise :class:`DetectorFolderError` unless every training row is a row of ``generation_ids`` (every row of
        ``source``, the data the config says the detector was trained on): a training_rows.json naming other rows
        would have the real training rows scored as held out."""
        unknown = sorted(set(self.training_generation_ids) - set(generation_ids))
        if unknown:
            path = (self.folder or Path(".")) / TRAINING_ROWS_FILE
            raise DetectorFolderError(f"{path}: {len(unknown)} of its {len(self.training_generation_ids)} "
                                      f"generation_ids are no row of {source}, the data config.json says it was "
                                      f"trained on (e.g. {unknown[0][:80]!r}): not this detector's training rows "
                                      "(retrain it, or score it on other data)")

    def token_logits(self, data: Any, internals: Any = None) -> np.ndarray:
        """Flat token logits ``(N_tokens,)`` of a split (any input of :func:`much_metric.baselines.token_arrays`);
        ``internals``: the pack (path or :class:`~much_dataset.internals.InternalsPack`) a probe or claim head reads,
        checked against the model and layers it was trained on
        (:class:`~much_metric.learned.internals.PackMismatchError`)."""
        from much_metric.baselines import token_arrays
        from much_metric.learned import internals as observed

        arrays = token_arrays(data)
        context = None
        if self.kind.needs_internals:
            if internals is None:
                raise ValueError(f"{self.folder or 'this detector'}: a {self.kind.name} detector reads an internals "
                                 "pack of the model it was trained on: pass internals=PACK (much run --internals "
                                 "PACK)")
            pack = observed.open_pack(internals)
            observed.check_pack(self.observer, pack, folder=self.folder)
            context = observed.Observed(pack, self.observer)
        elif internals is not None:
            raise ValueError(f"a {self.kind.name} detector reads no internals pack (internals= is for the probe and "
                             "claim_head detectors)")
        inputs = ((self.kind.inputs(arrays, context) - self.weights["input_mean"]) / self.weights["input_std"])
        segments = observed.claim_segments(arrays) if self.kind.segmented else None
        return self.kind.token_logits(self.weights, inputs.astype(np.float32), arrays.offsets, self.hyperparameters,
                                      segments)

    def token_scores(self, data: Any, internals: Any = None) -> np.ndarray:
        """Flat token uncertainties in (0, 1), shape ``(N_tokens,)``: every sample's tokens end to end; higher = more
        likely hallucinated (``internals``: see :meth:`token_logits`). :meth:`sample_scores` gives one array per
        sample, the shape :func:`much_metric.score` takes.

        Warns (``RuntimeWarning``) when every token gets the same score: such a detector ranks nothing."""
        scores = _sigmoid(self.token_logits(data, internals))
        if scores.size > 1 and np.ptp(scores) == 0:
            warnings.warn(f"{self.folder or 'the detector'}: every token gets the same score {scores[0]:.6g}; the "
                          "detector ranks nothing (check its weights, e.g. the bias)", RuntimeWarning, stacklevel=2)
        return scores

    def sample_scores(self, data: Any, internals: Any = None) -> list[np.ndarray]:
        """:meth:`token_scores` split into one array per sample, in the split's order: what
        :func:`much_metric.score` takes (``score(detector.sample_scores(split), split["token_chunks"], ...)``)."""
        from much_metric.baselines import token_arrays

        arrays = token_arrays(data)  # once: token_scores takes the arrays as they are
        return arrays.split(self.token_scores(arrays, internals))

    def save(self, folder: str | Path, *, card: str | None = None) -> Path:
        """Write ``config.json``, ``weights.safetensors``, ``training_rows.json`` and ``card.md`` into ``folder``
        (atomically each)."""
        from safetensors.numpy import save

        from much_metric.fileio import atomic_write_bytes, atomic_write_text

        folder = Path(folder)
        atomic_write_bytes(folder / WEIGHTS_FILE, save({k: np.ascontiguousarray(v, dtype=np.float32)
                                                        for k, v in self.weights.items()}))
        atomic_write_text(folder / TRAINING_ROWS_FILE,
                          json.dumps({part: sorted(self.training_rows[part]) for part in ("train", "validation")})
                          + "\n")
        atomic_write_text(folder / CONFIG_FILE, json.dumps(self.config, indent=2, sort_keys=True) + "\n")
        if card is not None:
            atomic_write_text(folder / CARD_FILE, card)
        self.folder = folder
        return folder


def _fail(path: Path, field: str | None, problem: str) -> DetectorFolderError:
    where = f"{path}: field {field!r}" if field else str(path)
    return DetectorFolderError(f"{where} {problem} (not a detector folder written by `much train`; retrain it)")


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (a device, a fifo or a huge file is refused unread)."""
    if not path.exists():
        raise DetectorFolderError(f"{path.parent} is not a learned detector folder: {path.name} is missing "
                                  "(write one with `much train` or LinearDetector(...).fit(...).save(folder))")
    if not path.is_file():
        raise _fail(path, None, "is not a regular file")
    size = path.stat().st_size
    if size > limit:
        raise _fail(path, None, f"has {size:,} bytes, more than the {limit:,} a detector of this config needs")
    data = path.read_bytes()
    if len(data) > limit:
        raise _fail(path, None, f"has more than {limit:,} bytes")
    return data


def _json(path: Path, limit: int) -> Any:
    try:
        return json.loads(_read_regular(path, limit).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _fail(path, None, f"is not valid JSON ({error})") from error


def _positive_int(path: Path, field: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise _fail(path, field, f"must be an integer in [1, {high:,}], got {value!r}")
    return value


_OBSERVER_INTS = {"n_layers": 4096, "n_heads": 4096, "hidden_size": 1 << 17}
#: Largest number of per-token inputs a folder may declare (refused before anything is allocated).
MAX_INPUTS = 1 << 20


def _check_observer(config: dict[str, Any], path: Path, kind: Kind) -> dict[str, Any] | None:
    """The ``internals`` record of a kind that reads a pack, checked (None for the other kinds)."""
    if not kind.needs_internals:
        return None
    observer = config.get("internals")
    if not isinstance(observer, dict):
        raise _fail(path, "internals", f"must be a JSON object (the pack a {kind.name} detector was trained on)")
    for key in ("model", "weights_sha256"):
        if not isinstance(observer.get(key), str):
            raise _fail(path, f"internals.{key}", f"must be a string, got {observer.get(key)!r}")
    for key, high in _OBSERVER_INTS.items():
        _positive_int(path, f"internals.{key}", observer.get(key), high)
    read = "hidden_layer" if kind.reads == "hidden" else "attention_window"
    value = observer.get(read)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4096:
        raise _fail(path, f"internals.{read}", f"must be an integer in [0, 4,096], got {value!r}")
    width = observer["n_layers"] * observer["n_heads"] * max(observer.get("attention_window") or 1, 1)
    if max(width, observer["hidden_size"]) > MAX_INPUTS:
        raise _fail(path, "internals", f"declares more than {MAX_INPUTS:,} inputs per token")
    return observer


def _check_config(config: Any, path: Path) -> tuple[Kind, dict[str, Any]]:
    from much_metric.scoring import AGGREGATORS

    if not isinstance(config, dict):
        raise _fail(path, None, "must hold a JSON object")
    if config.get("format") != FORMAT:
        raise _fail(path, "format", f"must be {FORMAT!r}, got {config.get('format')!r}")
    if config.get("version") != FORMAT_VERSION:
        raise _fail(path, "version", f"is {config.get('version')!r}; this toolkit reads version {FORMAT_VERSION}")
    if config.get("detector") not in KINDS:
        raise _fail(path, "detector", f"must be one of {sorted(KINDS)}, got {config.get('detector')!r}")
    kind = KINDS[config["detector"]]
    observer = _check_observer(config, path, kind)
    if list(config.get("inputs") or []) != list(kind.names(observer)):
        raise _fail(path, "inputs", f"differs from this toolkit's {kind.name} inputs")
    if config.get("aggregator") not in AGGREGATORS:
        raise _fail(path, "aggregator", f"must be one of {AGGREGATORS}, got {config.get('aggregator')!r}")
    if config.get("stopword_handling") not in _STOPWORDS:
        raise _fail(path, "stopword_handling", f"must be one of {_STOPWORDS}, got {config.get('stopword_handling')!r}")
    hyper = _check_hyperparameters(config.get("hyperparameters"), path, kind)
    if not isinstance(config.get("protocol", {}), dict):
        raise _fail(path, "protocol", "must be a JSON object")
    return kind, hyper


def _check_hyperparameters(hyper: Any, path: Path, kind: Kind) -> dict[str, Any]:
    """The kind's hyper-parameters, each against the kind's constraint, then its rule across them (before anything
    is allocated: the sizes shape the parameters)."""
    if not isinstance(hyper, dict):
        raise _fail(path, "hyperparameters", "must be a JSON object")
    missing, extra = sorted(set(kind.hyperparameters) - set(hyper)), sorted(set(hyper) - set(kind.hyperparameters))
    if missing or extra:
        name = (missing or extra)[0]
        raise _fail(path, f"hyperparameters.{name}", "is missing" if missing else
                    f"is not a hyper-parameter of a {kind.name} detector")
    for name, value in hyper.items():
        constraint = kind.constraints[name]
        if not constraint.is_satisfied_by(value):
            raise _fail(path, f"hyperparameters.{name}", f"must be {constraint.description}, got {value!r}")
    if kind.check is not None:
        try:
            kind.check(hyper)
        except ValueError as error:
            raise _fail(path, "hyperparameters", str(error)) from None
    return hyper


def _check_weights(weights: dict[str, np.ndarray], path: Path, kind: Kind, n_inputs: int,
                   hyper: dict[str, Any]) -> None:
    hidden = int(hyper.get("hidden", 0))
    expected = {**kind.parameter_shapes(n_inputs, hyper), "input_mean": (n_inputs,), "input_std": (n_inputs,)}
    missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or extra:
        name = (missing or extra)[0]
        raise _fail(path, name, "is missing" if missing else f"is not a parameter of a {kind.name} detector")
    for name, shape in expected.items():
        value = weights[name]
        if value.dtype != np.float32:
            raise _fail(path, name, f"must be float32, got {value.dtype}")
        if value.shape != shape:
            raise _fail(path, name, f"has shape {value.shape}; a {kind.name} detector with {n_inputs} inputs"
                        + (f" and hidden size {hidden}" if hidden else "") + f" needs {shape}")
        if not np.isfinite(value).all():
            raise _fail(path, name, f"holds {int((~np.isfinite(value)).sum())} non-finite value(s)")
    if not (weights["input_std"] > 0).all():
        raise _fail(path, "input_std", "must be positive")


def _check_rows(rows: Any, path: Path) -> dict[str, list[str]]:
    if not isinstance(rows, dict) or set(rows) != {"train", "validation"}:
        raise _fail(path, None, "must be a JSON object with exactly the keys 'train' and 'validation'")
    for part in ("train", "validation"):
        ids = rows[part]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
            raise _fail(path, part, "must be a non-empty list of generation_ids (strings)")
        if ids != sorted(set(ids)):
            raise _fail(path, part, "must be sorted and hold each generation_id once")
    shared = set(rows["train"]) & set(rows["validation"])
    if shared:
        raise _fail(path, "validation", f"shares {len(shared)} generation_id(s) with 'train', e.g. "
                    f"{sorted(shared)[0]!r}")
    return {"train": rows["train"], "validation": rows["validation"]}


def _check_rows_record(config: dict[str, Any], rows: dict[str, list[str]], path: Path) -> None:
    """The training rows are the ones config.json records: their digest (folders written since it is recorded) and
    their numbers, so that a training_rows.json naming other rows (scoring the real training rows as held out) is
    refused."""
    record = config.get("training_data") if isinstance(config.get("training_data"), dict) else {}
    digest = record.get("rows_sha256")
    if digest is not None and digest != rows_digest(rows):
        raise _fail(path, None, "does not hold the rows config.json records (training_data.rows_sha256): it was "
                    "edited or replaced, so the rows that trained this detector are unknown")
    for part, key in (("train", "n_samples"), ("validation", "n_validation_samples")):
        count = record.get(key)
        if isinstance(count, int) and not isinstance(count, bool) and count != len(rows[part]):
            raise _fail(path, part, f"lists {len(rows[part])} generation_ids, config.json records {count} "
                        f"(training_data.{key}): not this detector's rows")


def check_folder(folder: str | Path) -> Detector:
    """Read and check a detector folder completely (see the module docstring); raises
    :class:`DetectorFolderError` naming the file and the field, before anything is built."""
    from safetensors.numpy import load

    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DetectorFolderError(f"{folder} is not a learned detector folder (no such directory; write one with "
                                  "`much train`)")
    config_path = folder / CONFIG_FILE
    config = _json(config_path, MAX_CONFIG_BYTES)
    kind, hyper = _check_config(config, config_path)
    n_inputs = len(kind.names(config.get("internals")))
    n_values = sum(int(np.prod(s)) for s in kind.parameter_shapes(n_inputs, hyper).values()) + 2 * n_inputs
    weights_path = folder / WEIGHTS_FILE
    raw = _read_regular(weights_path, 4 * n_values + _HEADER_BYTES)
    try:
        weights = load(raw)
    except Exception as error:  # noqa: BLE001 - safetensors raises its own error type for a corrupt file
        raise _fail(weights_path, None, f"is not a readable safetensors file ({error})") from error
    _check_weights(weights, weights_path, kind, n_inputs, hyper)
    rows_path = folder / TRAINING_ROWS_FILE
    rows = _check_rows(_json(rows_path, MAX_ROWS_BYTES), rows_path)
    _check_rows_record(config, rows, rows_path)
    return Detector(config, weights, rows, folder)


def load_detector(folder: str | Path) -> Detector:
    """Read a detector folder (JSON + safetensors only), checked completely first (:func:`check_folder`)."""
    return check_folder(folder)
