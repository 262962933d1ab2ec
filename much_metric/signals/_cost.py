"""What a signal cost to compute: stored with it, read by every table.

A signal file written by ``much run --out`` (:func:`much_metric.baselines.compute_signals`) carries, in its
signal-level metadata (:func:`much_metric.signals.read_signal_metadata`, parquet key ``much.signal``, so readers
that ignore metadata and the submission archive reader see a plain MUCH-signals file), a ``cost`` object:

* ``wall_seconds`` / ``cpu_seconds``: the method's computation (process CPU time: every thread of the process), summed
  over resumed runs; data loading and writing files not included;
* ``n_samples`` / ``n_tokens`` / ``n_claims``: what it covered (claims: each sample's chunks but its EOS claim, the
  claims the metric scores), and the same seconds ``..._per_claim`` / ``..._per_token``;
* ``forward_passes`` (model forward passes: an NLI model's batches), ``samples`` (answers generated beyond the stored
  one) and ``model_calls`` (requests to a model outside the process): what it used beyond the stored data, 0 for the
  methods that read only the stored probabilities;
* ``top_k``: the input view it was computed on (``much run --top-k``; None: the stored 24 candidates);
* ``machines``: each machine that computed part of it (system, processor, CPUs, the threads the process could use).

A leaderboard upload cannot be measured by the server: its cost is what the submitter declares
(:class:`DeclaredCost`, from the archive's ``submission.json``), and every table says so.
"""

from __future__ import annotations

import math
import numbers
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from much_dataset.params import Interval, check_param

__all__ = ["COST_KEY", "DeclaredCost", "SignalCost", "cost_of", "format_seconds", "machine_record"]

#: The key of the cost object in a signal file's signal-level metadata.
COST_KEY = "cost"
_COUNTS = ("forward_passes", "samples", "model_calls")


def machine_record() -> dict[str, Any]:
    """This machine, as a cost record names it: system, architecture, processor model, CPUs, and the threads this
    process may use (its CPU affinity; torch's intra-op threads when torch is already imported)."""
    processor = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:  # Linux: the model name platform leaves out
            processor = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")),
                             processor)
    except OSError:
        pass
    threads: dict[str, int] = {"cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                               else (os.cpu_count() or 1)}
    torch = sys.modules.get("torch")  # never imported for this: only what the method itself used
    if torch is not None and hasattr(torch, "get_num_threads"):
        threads["torch"] = int(torch.get_num_threads())
    return {"system": platform.system(), "machine": platform.machine(), "processor": processor,
            "cpus": os.cpu_count() or 1, "threads": threads}


#: A count and a duration of a cost record: finite, not negative (JSON's NaN and Infinity are refused).
_COUNT = Interval(numbers.Integral, 0, math.inf, closed="left")
_SECONDS = Interval(numbers.Real, 0, math.inf, closed="left")


def _number(value: Any, name: str, *, integer: bool = False) -> float | int:
    shown = value if isinstance(value, int | float) or value is None else str(value)[:40]
    check_param(f"cost field {name!r}", shown, _COUNT if integer else _SECONDS)
    return value


#: Fields ``to_dict`` derives from the others (per claim, per token); checked on read like the others.
_DERIVED = ("wall_seconds_per_claim", "cpu_seconds_per_claim", "wall_seconds_per_token", "cpu_seconds_per_token")


def _check_finite(value: Any, where: str) -> None:
    """Every number inside ``value`` (nested objects and lists) finite: JSON's NaN and Infinity are refused."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"cost field {where!r} must hold finite numbers, got {value!r}")
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _check_finite(item, f"{where}.{key}" if isinstance(value, Mapping) else f"{where}[{key}]")


@dataclass(frozen=True, kw_only=True)
class SignalCost:
    """The measured cost of one signal (see the module docstring for each field)."""

    wall_seconds: float
    cpu_seconds: float
    n_samples: int
    n_tokens: int
    n_claims: int | None = None
    forward_passes: int = 0
    samples: int = 0
    model_calls: int = 0
    top_k: int | None = None
    machines: tuple[Mapping[str, Any], ...] = field(default=())

    @property
    def seconds_per_claim(self) -> float:
        """Wall seconds per claim (nan when the claims are unknown or none)."""
        return self.wall_seconds / self.n_claims if self.n_claims else math.nan

    @property
    def seconds_per_token(self) -> float:
        return self.wall_seconds / self.n_tokens if self.n_tokens else math.nan

    def plus(self, other: SignalCost) -> SignalCost:
        """Two parts of one signal (a resumed run): times and counts added, machines gathered."""
        if self.top_k != other.top_k:
            raise ValueError(f"cannot add the cost of a signal computed on top-{other.top_k} to one computed on "
                             f"top-{self.top_k}")
        machines = [*self.machines, *(m for m in other.machines if m not in self.machines)]
        claims = None if self.n_claims is None or other.n_claims is None else self.n_claims + other.n_claims
        return replace(self, wall_seconds=self.wall_seconds + other.wall_seconds,
                       cpu_seconds=self.cpu_seconds + other.cpu_seconds, n_samples=self.n_samples + other.n_samples,
                       n_tokens=self.n_tokens + other.n_tokens, n_claims=claims,
                       machines=tuple(machines), **{k: getattr(self, k) + getattr(other, k) for k in _COUNTS})

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON object (per-claim and per-token seconds included; None where undefined)."""
        def per(seconds: float, count: int | None) -> float | None:
            return seconds / count if count else None

        return {"wall_seconds": self.wall_seconds, "cpu_seconds": self.cpu_seconds, "n_samples": self.n_samples,
                "n_tokens": self.n_tokens, "n_claims": self.n_claims,
                "wall_seconds_per_claim": per(self.wall_seconds, self.n_claims),
                "cpu_seconds_per_claim": per(self.cpu_seconds, self.n_claims),
                "wall_seconds_per_token": per(self.wall_seconds, self.n_tokens),
                "cpu_seconds_per_token": per(self.cpu_seconds, self.n_tokens),
                **{k: getattr(self, k) for k in _COUNTS}, "top_k": self.top_k,
                "machines": [dict(m) for m in self.machines]}

    @classmethod
    def from_dict(cls, value: Any) -> SignalCost:
        """Read a stored cost object back; ValueError naming the field when it is not one."""
        if not isinstance(value, Mapping):
            raise ValueError(f"the cost metadata must be a JSON object, got {type(value).__name__}")
        claims = value.get("n_claims")
        top_k = value.get("top_k")
        machines = value.get("machines", [])
        if not isinstance(machines, list) or not all(isinstance(m, Mapping) for m in machines) or len(machines) > 64:
            raise ValueError("cost field 'machines' must be a list of objects (64 at most)")
        _check_finite(machines, "machines")
        for key in _DERIVED:  # recomputed on read, but a stored NaN or negative is a damaged record, not a value
            if value.get(key) is not None:
                _number(value[key], key)
        return cls(wall_seconds=float(_number(value.get("wall_seconds"), "wall_seconds")),
                   cpu_seconds=float(_number(value.get("cpu_seconds"), "cpu_seconds")),
                   n_samples=int(_number(value.get("n_samples"), "n_samples", integer=True)),
                   n_tokens=int(_number(value.get("n_tokens"), "n_tokens", integer=True)),
                   n_claims=None if claims is None else int(_number(claims, "n_claims", integer=True)),
                   top_k=None if top_k is None else int(_number(top_k, "top_k", integer=True)),
                   machines=tuple(dict(m) for m in machines),
                   **{k: int(_number(value.get(k, 0), k, integer=True)) for k in _COUNTS})


@dataclass(frozen=True, kw_only=True)
class DeclaredCost:
    """A cost the submitter declares for an uploaded signal (``submission.json``: ``{"cost": {"<signal>":
    {"seconds_per_claim": 0.002, "machine": "1 x A100", "note": "5 samples per answer"}}}``): shown as declared,
    never as measured."""

    seconds_per_claim: float
    machine: str = ""
    note: str = ""

    @classmethod
    def from_dict(cls, value: Any) -> DeclaredCost:
        if not isinstance(value, Mapping):
            raise ValueError("a declared cost must be an object {\"seconds_per_claim\": number, \"machine\": text, "
                             "\"note\": text}")
        unknown = sorted(set(value) - {"seconds_per_claim", "machine", "note"})
        if unknown:
            raise ValueError(f"unknown declared cost field(s) {[k[:40] for k in unknown[:5]]} (seconds_per_claim, "
                             "machine, note)")
        texts = {}
        for key in ("machine", "note"):
            text = value.get(key, "")
            if not isinstance(text, str) or len(text) > 200 or any(ord(c) < 32 for c in text):
                raise ValueError(f"declared cost field {key!r} must be one line of text (200 characters at most)")
            texts[key] = text
        seconds = _number(value.get("seconds_per_claim"), "seconds_per_claim")
        if seconds >= 1e6:
            raise ValueError("declared cost field 'seconds_per_claim' must be below 1e6")
        return cls(seconds_per_claim=float(seconds), **texts)

    def to_dict(self) -> dict[str, Any]:
        return {"seconds_per_claim": self.seconds_per_claim, "machine": self.machine, "note": self.note}


def cost_of(metadata: Mapping[str, Any]) -> SignalCost | None:
    """The :class:`SignalCost` a signal's metadata records (None when it records none)."""
    raw = metadata.get(COST_KEY) if isinstance(metadata, Mapping) else None
    return None if raw is None else SignalCost.from_dict(raw)


def format_seconds(seconds: float | None) -> str:
    """``"3.1 µs"``, ``"12 ms"``, ``"1.5 s"`` (3 significant digits at most); ``"—"`` for None or nan."""
    if seconds is None or math.isnan(seconds):
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"  # unreachable
