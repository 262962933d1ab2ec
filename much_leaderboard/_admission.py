"""Who may put what on the board (issue 35): the rules applied to a valid archive before it is stored.

* **entry names**: compared after Unicode NFKC normalisation, case folding and whitespace collapsing; a name that a
  *another submitter* (the ``authors`` field, normalised the same way) already uses, or the name of a built-in
  baseline, is refused; the same submitter may send new versions under its name;
* **signal names**: a signal named like a baseline of the registry (:func:`much_metric.baselines.available`:
  built-ins and plugins, ``@claim`` suffix ignored, compared as entry names are: NFKC, case-folded, so
  ``Max_Likelihood`` is ``max_likelihood``) is refused -- unless its values are that built-in's own values on
  the evaluation data (a ``much run --out`` folder): then it is not listed again (the board has the built-in row);
  a learned detector's signal (``learned_<name>``, with its detector metadata) keeps its name;
* **learned signals**: a signal whose detector was trained or validated on any evaluation row is refused; its
  protocol is re-derived from its training rows, not copied from the archive: the rows the board's data source
  knows (every config and split of ``data.source``) give their languages, splits and models, a claimed protocol or
  held-out fold they contradict is refused (``leave-one-language-out`` held out ``de`` with German training rows,
  ``auto-to-manual`` with manually labelled ones), and a detector none of whose training rows the board knows is
  labelled "protocol not verified" whatever it claims (:meth:`Admission.verified_detector`);
* **daily limit**: at most ``daily_limit`` stored submissions per submitter in any 24 hours.

There are no accounts: the submitter is the ``authors`` field (an operator who needs more puts the Space behind a
login). Rules that depend on the store are checked under one lock with the insertion (one process).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import unicodedata
from typing import Any

import numpy as np

from much_metric.signals import CLAIM_SUFFIX, ParsedSubmission, SubmissionRejected

__all__ = ["Admission", "name_key", "DAY_SECONDS", "builtin_label", "relabel_builtins"]

DAY_SECONDS = 24 * 3600
_BUILTIN_SUFFIX = "(built-in baseline)"


def name_key(text: str) -> str:
    """How names are compared: NFKC, case-folded, whitespace collapsed (``'  Ｓｈａｒｅｄ '`` == ``'shared'``)."""
    return " ".join(unicodedata.normalize("NFKC", str(text or "")).casefold().split())


def builtin_label(signal: str) -> str:
    """A built-in row's method: the registry's display name, as every table prints it (``"KTC-4-0.3 (built-in
    baseline)"``, not ``ktc``); ``signal`` is the registry name or the stored one (``ktc_<hash>``)."""
    from much_metric.baselines import resolve

    return f"{resolve(signal).display} {_BUILTIN_SUFFIX}"


def relabel_builtins(store: Any) -> list[str]:
    """Give every built-in row of ``store`` its method's one display name (:func:`builtin_label`); returns the
    submissions renamed. A store written by an older server keeps its rows (``Leaderboard.add_baselines`` skips
    them), so without this they would keep their old label (``"KTC (built-in baseline)"``): run on every start."""
    renamed = []
    for row in store.rows():
        if row["kind"] != "baseline":
            continue
        try:
            label = builtin_label(row["signal"])
        except ValueError:  # a signal the registry no longer knows: its stored label stays
            continue
        if row["form"].get("method") != label and row["submission"] not in renamed:
            store.set_method(row["submission"], label)
            renamed.append(row["submission"])
    return renamed


def _builtin(name: str) -> Any:
    """The registry's baseline whose name pattern ``name`` matches (``@claim`` ignored; as written, or compared the
    way entry names are, :func:`name_key`), or None."""
    from much_metric.baselines import available

    bare = name[: -len(CLAIM_SUFFIX)] if name.endswith(CLAIM_SUFFIX) else name
    folded = name_key(bare)
    for baseline in available().values():
        if baseline.match(bare) is not None or baseline.match(folded) is not None:
            return baseline
    return None


def _display(name: str) -> str:
    from much_metric.baselines import resolve

    try:
        return resolve(name).display
    except (ValueError, KeyError):
        return name


class Admission:
    """The rules for one board (``data``: its :class:`much_leaderboard.EvaluationData`)."""

    def __init__(self, data: Any, *, daily_limit: int = 5) -> None:
        if isinstance(daily_limit, bool) or not isinstance(daily_limit, int) or daily_limit < 1:
            raise ValueError(f"daily_limit must be a positive integer, got {daily_limit!r}")
        self.data, self.daily_limit = data, daily_limit
        self.lock = threading.Lock()
        self._builtin_values: dict[str, dict[str, np.ndarray] | None] = {}
        self._values_lock = threading.Lock()
        self._ids: frozenset[str] | None = None
        self._catalogue: dict[str, tuple[str, str, str]] | None = None

    # -- the archive's content -----------------------------------------------------------------------------
    def filter(self, parsed: ParsedSubmission) -> tuple[ParsedSubmission, list[str]]:
        """The submission without the built-ins' own rows, and their names; refuses impersonation and learned
        signals scored on their training rows."""
        keep, copies = {}, []
        for name, values in parsed.signals.items():
            if name in parsed.learned and name.startswith("learned_"):
                keep[name] = values  # a learned detector's stored name, labelled by its detector
                continue
            baseline = _builtin(name)
            if baseline is None:
                keep[name] = values
            elif self._is_builtin_copy(name, values):
                copies.append(name)
            else:
                raise SubmissionRejected(
                    f"signal {name!r} is named like the built-in baseline {_display(name)} "
                    f"({baseline.name}) and its values are not that baseline's own: rename it (a submission's "
                    "signal may not take a built-in's name)")
        if not keep:
            raise SubmissionRejected(f"the archive holds only built-in baselines' own values ({', '.join(copies)}), "
                                     "already on the board: nothing new to list")
        self._check_learned(parsed, keep)
        learned = {k: {**v, "detector": self.verified_detector(k, v)} for k, v in parsed.learned.items() if k in keep}
        return dataclasses.replace(
            parsed, signals=keep, timings={k: v for k, v in parsed.timings.items() if k in keep},
            learned=learned), sorted(copies)

    def _rows_known(self) -> dict[str, tuple[str, str, str]]:
        """generation_id -> (lang, split, model) of every row of the board's data source (all configs and splits),
        and of its evaluation rows."""
        if self._catalogue is None:
            import datasets

            import much_dataset
            from much_dataset.schema import MUCH_GENERATION_CONFIGS

            def model(config: str) -> str:
                return str(MUCH_GENERATION_CONFIGS.get(config, {}).get("model", config))

            catalogue: dict[str, tuple[str, str, str]] = {}
            try:
                loaded = much_dataset.load(self.data.source)
            except (OSError, ValueError):  # a board given its dataset only: its own rows
                loaded = {}
            parts = loaded.items() if isinstance(loaded, datasets.DatasetDict | dict) else [("test", loaded)]
            for split, part in [*parts, ("test", self.data.dataset)]:
                for gid, lang, config in zip(part["generation_id"], part["lang"], part["generation_config"],
                                             strict=True):
                    catalogue.setdefault(str(gid), (str(lang), str(split), model(str(config))))
            self._catalogue = catalogue
        return self._catalogue

    def verified_detector(self, name: str, info: dict[str, Any]) -> dict[str, Any]:
        """The detector record the board shows for a learned signal: its kind, and the protocol and fold its
        training rows support (see the module docstring); raises :class:`SubmissionRejected` when the archive's
        claim contradicts them."""
        claimed = dict(info.get("detector") or {})
        known = [row for gid in info["training_generation_ids"] if (row := self._rows_known().get(gid)) is not None]
        if not known:
            return {"kind": claimed.get("kind"), "protocol": "protocol not verified (its training rows are not rows "
                    f"of {self.data.source})", "fold": None}
        langs, splits, models = ({row[i] for row in known} for i in range(3))
        held_langs, held_models = set(self.data.langs) - langs, set(self.data.models) - models
        supported = {"auto-to-manual": splits == {"train"}, "leave-one-language-out": bool(held_langs),
                     "leave-one-model-out": bool(held_models)}
        protocol = claimed.get("protocol")
        fold = str(claimed.get("fold") or "").split("=")[-1]
        held = held_langs if protocol == "leave-one-language-out" else held_models
        if protocol not in supported or not supported[protocol] or (
                protocol != "auto-to-manual" and fold and fold not in held):
            raise SubmissionRejected(
                f"signal {name!r}: its metadata says it was trained under {describe_detector(claimed)}, but its "
                f"{len(known)} training rows this board knows are of languages {sorted(langs)}, splits "
                f"{sorted(splits)} and models {sorted(models)}: the board labels a detector by what its training rows "
                "show; submit the signal file `much run` wrote from the detector folder")
        return {"kind": claimed.get("kind"), "protocol": protocol, "fold": claimed.get("fold")}

    def _evaluation_ids(self) -> frozenset[str]:
        if self._ids is None:
            self._ids = frozenset(self.data.dataset["generation_id"])
        return self._ids

    def _check_learned(self, parsed: ParsedSubmission, keep: dict[str, Any]) -> None:
        ids = self._evaluation_ids()
        for name, info in parsed.learned.items():
            if name not in keep:
                continue
            seen = info["training_generation_ids"] & ids
            if seen:
                detector = info["detector"]
                raise SubmissionRejected(
                    f"signal {name!r}: its detector ({describe_detector(detector)}) was trained or validated on "
                    f"{len(seen)} of the {len(ids)} evaluation rows (e.g. {min(seen)[:80]!r}); the leaderboard "
                    "scores a learned detector only on rows it never saw: train it without them")

    def _is_builtin_copy(self, name: str, values: dict[str, np.ndarray]) -> bool:
        reference = self._builtin_run(name)
        if reference is None or set(reference) != set(values):
            return False
        return all(np.shape(values[g]) == np.shape(r) and np.allclose(values[g], r, rtol=1e-5, atol=1e-7)
                   for g, r in reference.items())

    def _builtin_run(self, name: str) -> dict[str, np.ndarray] | None:
        """The built-in's values on the evaluation data (None: it needs a model or cannot be computed by name)."""
        from much_metric.baselines import compute_signals, resolve

        with self._values_lock:
            if name not in self._builtin_values:
                try:
                    spec = resolve(name)
                    if spec.needs:
                        raise ValueError(f"{name} needs {spec.needs}")
                    # keyed by the stored name (a claim-level method's ends with @claim): the one run asked
                    (run,) = compute_signals(self.data.dataset, [name], progress=False).values()
                    self._builtin_values[name] = {g: np.asarray(v, np.float64) for g, v in run.values.items()}
                except ValueError:  # a model-based or stored-only name: its values cannot be checked here
                    self._builtin_values[name] = None
            return self._builtin_values[name]

    # -- the store's state ---------------------------------------------------------------------------------
    def check_entry(self, store: Any, form: dict[str, Any], *, now: float | None = None) -> None:
        """Refuse an entry name of a built-in or of another submitter, and a submitter over the daily limit.
        Call under :attr:`lock`, with the insertion."""
        key, submitter = name_key(form.get("method", "")), name_key(form.get("authors", ""))
        if key.endswith(name_key(_BUILTIN_SUFFIX)) or _builtin(form.get("method", "").strip()) is not None:
            raise SubmissionRejected(f"method name {form.get('method')!r}: the name of a built-in baseline; "
                                     "choose your own")
        now = time.time() if now is None else now
        recent = 0
        for entry in store.submissions():
            if name_key(entry["form"].get("method", "")) == key and (
                    entry["kind"] == "baseline" or name_key(entry["form"].get("authors", "")) != submitter):
                owner = "a built-in baseline" if entry["kind"] == "baseline" else "another submitter"
                raise SubmissionRejected(f"method name {form.get('method')!r} is already used by {owner}; choose "
                                         "another name (a submitter's new versions keep the same authors)")
            if entry["kind"] == "submission" and name_key(entry["form"].get("authors", "")) == submitter \
                    and entry["submitted"] >= now - DAY_SECONDS:
                recent += 1
        if recent >= self.daily_limit:
            who = f"authors {form.get('authors')!r}" if submitter else "anonymous submitters (no authors)"
            raise SubmissionRejected(f"{who}: at most {self.daily_limit} submissions in 24 hours on this board; "
                                     "try again later")


def describe_detector(detector: dict[str, Any] | None) -> str:
    """``linear, leave-one-language-out, fold de`` (the parts that are known)."""
    detector = detector or {}
    parts = [detector.get("kind"), detector.get("protocol"),
             f"fold {detector['fold']}" if detector.get("fold") else None]
    return ", ".join(str(p) for p in parts if p) or "learned detector"


