"""Named training protocols with grouped, leakage-checked splits.

A protocol turns the rows of a MUCH dataset into one or more folds ``(train, validation, test)`` of row indices:

* ``auto-to-manual`` -- MUCH's natural protocol: fit on the automatically labelled ``train`` split (rows without
  human labels), validate on a held-out part of it, test on the human-labelled ``test`` rows (both annotators
  agree, :func:`much_dataset.selection.select_samples` with ``manual=True``). One fold.
* ``leave-one-language-out`` -- one fold per language: test on that language, train on the others.
* ``leave-one-model-out`` -- one fold per generating model (the model of a MUCH ``generation_config``, or the config
  id itself for other data such as the embedded sample's Mu-SHROOM rows): test on that model's answers.

No leakage: rows are grouped into connected components of "same question" (the prompt, case- and
whitespace-normalised), "same Wikipedia article" (the title of ``wiki_url``, unquoted and case-folded: Mu-SHROOM
translates its questions, so ``en``'s and ``de``'s questions about ``Adolf_Galland`` share the article
``adolf_galland`` although their prompts differ) and "same ``generation_id``". Rows of the training pool that share
one of these with a test row are purged from it (``Fold.purged`` counts them by the first shared key: question,
article, generation, or only through a chain of such links), the validation part is drawn by whole components, and
:func:`check_disjoint` verifies every pair of parts before a fold is returned. A dataset that holds the same
``generation_id`` twice is refused.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID, LANG, MUCH_CONFIGS, PROMPT, WIKI_URL

__all__ = ["PROTOCOLS", "Fold", "LeakageError", "RowInfo", "article_title", "check_disjoint", "make_folds", "row_info"]


class LeakageError(ValueError):
    """A question, a Wikipedia article or a generation appears on two sides of a split."""


@dataclass(frozen=True)
class RowInfo:
    """What the protocols need to know about each row (arrays of shape ``(n_rows,)``).

    ``origin``: the published split of the row (``"train"``/``"test"``); ``manual``: both annotators labelled the
    row identically; ``auto``: no human label at all; ``article``: the Wikipedia article's title (``""`` when the
    row has no ``wiki_url``: it is then grouped by question and generation only).
    """

    generation_id: np.ndarray
    question: np.ndarray
    lang: np.ndarray
    model: np.ndarray
    origin: np.ndarray
    manual: np.ndarray
    auto: np.ndarray
    article: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.generation_id)


@dataclass(frozen=True)
class Fold:
    """One fold of a protocol: row indices of each part (sorted), and the pool rows purged, counted by reason
    (``{"question": n, "article": n, "generation": n, "chain": n}``: the first key the row shares with a test row;
    ``chain``: linked to the test rows only through other purged rows)."""

    protocol: str
    name: str
    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray
    purged: Mapping[str, int]

    @property
    def n_purged(self) -> int:
        return int(sum(self.purged.values()))

    def describe(self) -> str:
        reasons = ", ".join(f"{n} shared {'a' if key == 'article' else 'the'} "
                            f"{'Wikipedia article' if key == 'article' else key}" if key != "chain" else
                            f"{n} linked through other purged rows" for key, n in self.purged.items() if n)
        return (f"{self.protocol} [{self.name}]: {len(self.train)} train, {len(self.validation)} validation, "
                f"{len(self.test)} test rows ({self.n_purged} purged" + (f": {reasons})" if reasons else ")"))


def _normalise(prompt: str) -> str:
    return re.sub(r"\s+", " ", str(prompt)).strip().casefold()


def article_title(url: Any) -> str:
    """The Wikipedia article of a ``wiki_url``: its title, unquoted, spaces as ``_``, case-folded
    (``https://de.wikipedia.org/wiki/Adolf_Galland`` -> ``adolf_galland``); ``""`` for no URL."""
    if url is None or not str(url).strip():
        return ""
    path = urllib.parse.urlsplit(str(url).strip()).path
    title = path.split("/wiki/", 1)[1] if "/wiki/" in path else path.rsplit("/", 1)[-1]
    return re.sub(r"[\s_]+", "_", urllib.parse.unquote(title)).strip("_").casefold()


def _labelled(values: Any) -> bool:
    return values is not None and len(values) > 0 and any(int(v) != 0 for v in values)


def row_info(dataset: Any, *, origin: Sequence[str] | None = None) -> RowInfo:
    """Protocol metadata of a ``datasets.Dataset`` (or a list of row dicts) of MUCH rows.

    Parameters
    ----------
    dataset : datasets.Dataset or sequence of mappings
        Needs ``generation_id``, ``prompt``, ``lang``, ``generation_config``, ``wiki_url`` (optional);
        ``human_labels_0/1`` and ``labels`` for the manual/auto selection (absent = auto).
    origin : sequence of str, optional
        The published split of each row (``"train"`` / ``"test"``); default ``"test"`` for every row.
    """
    def column(name: str) -> list[Any]:
        if hasattr(dataset, "column_names"):
            return list(dataset[name]) if name in dataset.column_names else [None] * len(dataset)
        return [row.get(name) for row in dataset]

    ids = np.asarray([str(v) for v in column(GENERATION_ID)], dtype=object)
    n = len(ids)
    h0, h1, labels = column("human_labels_0"), column("human_labels_1"), column("labels")
    manual = np.asarray([_labelled(a) and _labelled(b) and list(a) == list(b) == list(y)
                         for a, b, y in zip(h0, h1, labels, strict=True)], dtype=bool)
    auto = np.asarray([not _labelled(a) and not _labelled(b) for a, b in zip(h0, h1, strict=True)], dtype=bool)
    configs = [str(v) for v in column(GENERATION_CONFIG)]
    origin = np.asarray(["test"] * n if origin is None else [str(v) for v in origin], dtype=object)
    if len(origin) != n:
        raise ValueError(f"origin has {len(origin)} entries for {n} rows")
    return RowInfo(
        generation_id=ids,
        question=np.asarray([_normalise(v) for v in column(PROMPT)], dtype=object),
        lang=np.asarray([str(v) for v in column(LANG)], dtype=object),
        model=np.asarray([MUCH_CONFIGS.get(c, (c, None))[0] for c in configs], dtype=object),
        origin=origin, manual=manual, auto=auto,
        article=np.asarray([article_title(v) for v in column(WIKI_URL)], dtype=object),
    )


def _codes(values: np.ndarray) -> np.ndarray:
    return np.unique(values.astype(str), return_inverse=True)[1].reshape(-1)


def _keys(info: RowInfo) -> dict[str, np.ndarray]:
    """Grouping keys as string arrays; a row without an article gets its own (it shares none)."""
    keys = {"question": info.question.astype(str), "article": None, "generation": info.generation_id.astype(str)}
    if info.article is not None:
        article = info.article.astype(str)
        keys["article"] = np.where(article == "", np.char.add("\0row", np.arange(len(info)).astype(str)), article)
    return {name: value for name, value in keys.items() if value is not None}


def components(info: RowInfo) -> np.ndarray:
    """Connected component of each row under "same question", "same Wikipedia article" or "same generation_id",
    shape ``(n_rows,)``."""
    n = len(info)
    component = np.arange(n)
    keys = [_codes(value) for value in _keys(info).values()]
    while True:
        before = component.copy()
        for key in keys:  # each row takes the smallest component id among the rows sharing its key
            smallest = np.full(key.max() + 1 if n else 0, n, dtype=np.int64)
            np.minimum.at(smallest, key, component)
            component = np.minimum(component, smallest[key])
        if np.array_equal(component, before):
            return component


def check_disjoint(info: RowInfo, parts: Mapping[str, np.ndarray]) -> None:
    """Raise :class:`LeakageError` if two parts share a row, a question, a Wikipedia article or a
    ``generation_id``."""
    names = list(parts)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            a, b = np.asarray(parts[first], dtype=np.int64), np.asarray(parts[second], dtype=np.int64)
            keys = _keys(info)
            for field, values in (("row", np.arange(len(info))), ("question", keys["question"]),
                                  *((("Wikipedia article", keys["article"]),) if "article" in keys else ()),
                                  (GENERATION_ID, keys["generation"])):
                shared = np.intersect1d(values[a].astype(str), values[b].astype(str))
                if shared.size:
                    raise LeakageError(f"{field} {str(shared[0])!r} is in both the {first} and the {second} part "
                                       f"({shared.size} shared); a split must keep questions, articles and "
                                       "generations on one side")


def _purge(info: RowInfo, pool: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The pool rows kept, and the purged ones counted by the first key they share with a test row."""
    component = components(info)
    purged = pool[np.isin(component[pool], component[test])]
    counts, left = {}, purged
    for name, values in _keys(info).items():
        direct = np.isin(values[left], values[test])
        counts[name] = int(direct.sum())
        left = left[~direct]
    counts["chain"] = len(left)
    return pool[~np.isin(component[pool], component[test])], counts


def _validation(info: RowInfo, pool: np.ndarray, fraction: float, rng: np.random.Generator):
    """(train, validation) rows of the pool, the validation part made of whole components (about ``fraction``)."""
    _, inverse, sizes = np.unique(components(info)[pool], return_inverse=True, return_counts=True)
    order = rng.permutation(len(sizes))
    n_groups = min(int(np.searchsorted(np.cumsum(sizes[order]), fraction * len(pool))) + 1, len(sizes) - 1)
    chosen = np.isin(inverse.reshape(-1), order[:max(n_groups, 0)])
    return np.sort(pool[~chosen]), np.sort(pool[chosen])


def _auto_to_manual(info: RowInfo) -> list[tuple[str, np.ndarray, np.ndarray]]:
    test = np.flatnonzero((info.origin == "test") & info.manual)
    pool = np.flatnonzero((info.origin == "train") & info.auto)
    if not len(pool) or not len(test):
        raise ValueError(f"protocol 'auto-to-manual' needs automatically labelled rows of the train split and "
                         f"human-labelled rows of the test split; these data have {len(pool)} and {len(test)} "
                         "(the embedded sample is test-only: use leave-one-language-out there)")
    return [("train:auto -> test:manual", pool, test)]


def _leave_one_out(field: str) -> Callable[[RowInfo], list[tuple[str, np.ndarray, np.ndarray]]]:
    def folds(info: RowInfo) -> list[tuple[str, np.ndarray, np.ndarray]]:
        values = getattr(info, field).astype(str)
        groups = sorted(set(values))
        if len(groups) < 2:
            raise ValueError(f"leave-one-{field}-out needs at least 2 values of {field}, found {groups}")
        return [(f"{field}={g}", np.flatnonzero(values != g), np.flatnonzero(values == g)) for g in groups]

    return folds


#: Protocol name -> function of the rows giving ``(fold name, pool rows, test rows)`` triples.
PROTOCOLS: dict[str, Callable[[RowInfo], list[tuple[str, np.ndarray, np.ndarray]]]] = {
    "auto-to-manual": _auto_to_manual,
    "leave-one-language-out": _leave_one_out("lang"),
    "leave-one-model-out": _leave_one_out("model"),
}


def make_folds(info: RowInfo, protocol: str, *, validation_fraction: float = 0.15, random_state: int = 0,
               only: str | None = None) -> list[Fold]:
    """The folds of ``protocol`` (see the module docstring), each checked with :func:`check_disjoint`.

    Parameters
    ----------
    info : RowInfo
    protocol : one of :data:`PROTOCOLS`
    validation_fraction : float in (0, 1), keyword-only, default 0.15
        Share of the (purged) training pool held out, by whole question/generation components, for early stopping.
    random_state : int, keyword-only, default 0
        Seed of the validation draw (one ``numpy`` generator per fold: folds do not depend on each other).
    only : str, keyword-only, optional
        Keep only the fold whose held-out value is this (``"de"`` for leave-one-language-out).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {sorted(PROTOCOLS)}, got {protocol!r}")
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction!r}")
    ids, counts = np.unique(info.generation_id.astype(str), return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"{GENERATION_ID} {str(ids[counts > 1][0])!r} occurs {counts[counts > 1][0]} times: a dataset "
                         "with duplicated rows would put the same generation on both sides of a split")
    folds = []
    for index, (name, pool, test) in enumerate(PROTOCOLS[protocol](info)):
        if only is not None and name.split("=")[-1] != only:
            continue
        kept, purged = _purge(info, pool, test)
        train, validation = _validation(info, kept, validation_fraction, np.random.default_rng([random_state, index]))
        if not len(train) or not len(validation):
            raise ValueError(f"{protocol} [{name}]: too few training rows after purging ({len(kept)})")
        check_disjoint(info, {"train": train, "validation": validation, "test": test})
        folds.append(Fold(protocol, name, train, validation, np.sort(test), purged))
    if not folds:
        raise ValueError(f"{protocol}: no fold named {only!r}")
    return folds
