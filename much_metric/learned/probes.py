"""Linear probes on an internals pack's hidden states: one logistic regression over tokens, claim labels on tokens.

A probe reads the ``hidden`` array of an internals pack (:func:`much_dataset.load_internals`, one hidden_states
index chosen by ``layer``) and predicts, per output token, whether the claim that holds it is hallucinated. Training
tokens are the non-stopword tokens of every labelled claim (the last chunk, EOS, left out as the metric leaves it
out), each with its claim's label; the token score is the predicted probability of "hallucinated" (higher = more
uncertain, in [0, 1], so the product aggregator applies).

Folds that group by topic: :func:`article_key` maps a row to the title of its Wikipedia article (URL-decoded,
case-folded, ``_`` as space), the same string across languages for most names, so a leave-one-language-out fold can
drop the training rows about an article its test language also asks about (:func:`language_folds`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import numpy as np

from much_dataset import schema

__all__ = ["LinearProbe", "probe_inputs", "token_targets", "article_key", "language_folds", "ProbeFold"]


def article_key(url: str) -> str:
    """``https://de.wikipedia.org/wiki/David_F._Sandberg`` -> ``david f. sandberg``."""
    title = unquote(str(url).rstrip("/").rsplit("/", 1)[-1])
    return " ".join(title.replace("_", " ").casefold().split())


def token_targets(token_chunks: Sequence[Sequence[int]], labels: Sequence[int], stopword_mask: Sequence[bool],
                  n_tokens: int) -> np.ndarray:
    """Per token: 1 (its claim is hallucinated, label -1), 0 (claim correct, label 1), or -1 (no target: a
    stopword, a token of no claim, the last chunk, or an unlabelled claim)."""
    target = np.full(n_tokens, -1, dtype=np.int8)
    chunks = list(token_chunks)[:-1]  # the last chunk (EOS) is not a claim of the metric
    for chunk, label in zip(chunks, labels, strict=False):
        if label in (-1, 1):
            target[np.asarray(chunk, dtype=np.int64)] = 1 if label == -1 else 0
    target[np.asarray(stopword_mask, dtype=bool)] = -1
    return target


def probe_inputs(internals: Mapping[str, Mapping[str, np.ndarray]], generation_ids: Sequence[str], *,
                 layer: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated hidden states ``(N_tokens, d)`` float32 of the rows (column ``layer`` of the pack's ``hidden``)
    and the sample offsets ``(n_rows + 1,)``."""
    blocks = [np.asarray(internals[gid]["hidden"][:, layer], dtype=np.float32) for gid in generation_ids]
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in blocks])]).astype(np.int64)
    width = blocks[0].shape[1] if blocks else 0
    return (np.concatenate(blocks) if blocks else np.zeros((0, width), np.float32)), offsets


@dataclass
class LinearProbe:
    """Standardised features -> L2 logistic regression (scikit-learn), fitted on tokens with a target.

    Parameters
    ----------
    C : float, default 0.05
        Inverse regularisation strength (strong: a few thousand tokens, hundreds of dimensions).
    max_iter : int, default 500
    class_weight : "balanced" or None, default "balanced"
    random_state : int, default 0
    """

    C: float = 0.05
    max_iter: int = 500
    class_weight: str | None = "balanced"
    random_state: int = 0
    model_: Any = field(default=None, init=False, repr=False)

    def fit(self, features: np.ndarray, targets: np.ndarray) -> LinearProbe:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        keep = targets >= 0
        if keep.sum() == 0 or len(np.unique(targets[keep])) < 2:
            raise ValueError("a probe needs training tokens of both classes (hallucinated and correct claims)")
        self.model_ = make_pipeline(
            StandardScaler(),
            LogisticRegression(C=self.C, max_iter=self.max_iter, class_weight=self.class_weight,
                               random_state=self.random_state))
        self.model_.fit(features[keep], targets[keep])
        return self

    def token_scores(self, features: np.ndarray) -> np.ndarray:
        """P(hallucinated) per token (higher = more uncertain)."""
        if self.model_ is None:
            raise ValueError("LinearProbe is not fitted: call fit first")
        return self.model_.predict_proba(features)[:, 1]


@dataclass(frozen=True)
class ProbeFold:
    """Row indices of one leave-one-language-out fold; ``n_dropped``: training rows about a test article."""

    language: str
    train: np.ndarray
    test: np.ndarray
    n_dropped: int


def language_folds(langs: Sequence[str], urls: Sequence[str], *, group_articles: bool = True) -> list[ProbeFold]:
    """One fold per language: test on it, train on the others; with ``group_articles`` the training rows whose
    Wikipedia article (:func:`article_key`) is also asked about in the test language are dropped."""
    langs = np.asarray(langs)
    keys = np.asarray([article_key(url) for url in urls])
    folds = []
    for language in sorted(set(langs.tolist())):
        test = np.flatnonzero(langs == language)
        pool = np.flatnonzero(langs != language)
        train = pool
        if group_articles:
            train = pool[~np.isin(keys[pool], keys[test])]
        folds.append(ProbeFold(language, train, test, len(pool) - len(train)))
    return folds


def row_targets(dataset: Any, indices: Sequence[int]) -> list[np.ndarray]:
    """:func:`token_targets` of rows ``indices`` of a MUCH split (a ``datasets.Dataset`` or a list of rows)."""
    targets = []
    for index in indices:
        row = dataset[int(index)]
        targets.append(token_targets(row[schema.TOKEN_CHUNKS], row[schema.LABELS], row[schema.STOPWORD_MASK],
                                     len(row[schema.OUTPUT_TOKENS])))
    return targets
