"""How much a body of evidence supports each claim: the shared core of the sampling-consistency and reference
detectors.

For every row, the evidence is a list of **groups** (one per sample; one for the article or the chunks), each a list
of **units** (its sentences, or the whole text). A scorer gives each (claim, unit) pair a number, reduced by ``max``
over the units of a group (the SummaC-zs max operator of the multilingual detection seed, and UQLM's matched-unit
reduction), then averaged over the groups (the seed's pairwise setting: "the average score across all
generations"). A group without units gives 0.

NLI pairs are (premise = unit, hypothesis = claim), scored for the whole split in one call of the NLI resource (so a
:class:`~much_metric.baselines.nli.NliScorer` de-duplicates and batches them, and an
:class:`~much_metric.baselines.nli_routing.NliRouter` sends each row's pairs to the model of its language).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_metric.baselines import _lexical
from much_metric.baselines.nli import nli_label_indices, run_nli

__all__ = ["LEXICAL", "NLI_SCORES", "Evidence", "cosine_support", "entity_support", "group_max", "lexical_support",
           "nli_support", "nli_uncertainty", "pairwise_scores"]

#: The multilingual detection seed's NLI scores and lexical measures, as signal-name parts.
NLI_SCORES = ("ent", "con", "diff", "unv")
LEXICAL = ("rouge1", "rougel", "entities")


@dataclass(frozen=True)
class Evidence:
    """One row: its ``generation_id``, its claims' texts, and its evidence groups (lists of unit texts)."""

    generation_id: str
    claims: Sequence[str]
    groups: Sequence[Sequence[str]]


def group_max(values: np.ndarray, group_of_unit: np.ndarray, n_groups: int) -> np.ndarray:
    """(n_claims, n_units) -> (n_claims, n_groups): max over each group's units, 0 for a group without units."""
    out = np.zeros((values.shape[0], n_groups))
    if values.size:
        np.maximum.at(out.T, group_of_unit, values.T)
    return out


def _units(row: Evidence) -> tuple[list[str], np.ndarray]:
    units = [unit for group in row.groups for unit in group]
    owner = np.repeat(np.arange(len(row.groups)), [len(g) for g in row.groups]).astype(np.int64)
    return units, owner


def nli_support(nli: object, rows: Sequence[Evidence]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per row, ``(ENT, CON)`` of shape (n_claims, n_groups): max entailment / contradiction probability of each claim
    over each group's units."""
    labels = nli_label_indices({int(k): v for k, v in nli.id2label.items()})
    premises, hypotheses, owners = [], [], []
    layout = []
    for row in rows:
        units, owner = _units(row)
        layout.append((len(row.claims), units, owner, len(premises)))
        for claim in row.claims:
            premises.extend(units)
            hypotheses.extend([claim] * len(units))
            owners.extend([row.generation_id] * len(units))
    probabilities = run_nli(nli, premises, hypotheses, labels.n_labels, owners)
    out = []
    for (n_claims, units, owner, start), row in zip(layout, rows, strict=True):
        block = probabilities[start : start + n_claims * len(units)].reshape(n_claims, len(units), labels.n_labels)
        n_groups = len(row.groups)
        out.append((group_max(block[:, :, labels.entailment], owner, n_groups),
                    group_max(block[:, :, labels.contradiction], owner, n_groups)))
    return out


def pairwise_scores(rows: Sequence[Evidence], pair: Callable[[str, Sequence[str]], np.ndarray]) -> list[np.ndarray]:
    """Per row, (n_claims, n_groups) of ``max over the group's units of pair(claim, units)``; ``pair`` returns one
    value per unit."""
    out = []
    for row in rows:
        units, owner = _units(row)
        values = np.array([pair(claim, units) for claim in row.claims], dtype=np.float64).reshape(
            len(row.claims), len(units))
        out.append(group_max(values, owner, len(row.groups)))
    return out


def nli_uncertainty(ent: np.ndarray, con: np.ndarray, score: str) -> np.ndarray:
    """Claim uncertainty in [0, 1] from (n_claims, n_groups) ENT / CON matrices, averaged over the groups."""
    if ent.shape[1] == 0:
        return np.ones(ent.shape[0]) if score != "con" else np.zeros(ent.shape[0])
    if score == "ent":
        return 1.0 - ent.mean(axis=1)
    if score == "con":
        return con.mean(axis=1)
    if score == "diff":
        return (1.0 - (ent - con).mean(axis=1)) / 2.0
    if score == "unv":
        return (1.0 - np.maximum(ent, con)).mean(axis=1)
    raise ValueError(f"NLI score must be one of {NLI_SCORES}, got {score!r}")


def entity_support(claim: str, text: str, tagger: str = "pattern", language: str = "en") -> float:
    """Share of the claim's named entities that ``text`` mentions (1.0 for a claim without one)."""
    mine = _lexical.entities(claim, tagger, language)
    if not mine:
        return 1.0
    theirs = _lexical.entities(text, tagger, language)
    folded = text.casefold()
    return sum(1 for entity in mine if entity in theirs or entity in folded) / len(mine)


def lexical_support(rows: list[Evidence], measure: str) -> list[np.ndarray]:
    """Per row, (n_claims, n_groups) support in [0, 1] by ROUGE-1 / ROUGE-L precision (max over a group's units) or
    entity overlap (against the group's whole text)."""
    if measure == "rouge1":
        return pairwise_scores(rows, lambda claim, units: [_lexical.rouge1_precision(claim, u) for u in units])
    if measure == "rougel":
        out = []
        for row in rows:
            out.append(np.array([[_lexical.best_rougel_precision(claim, group) if group else 0.0
                                  for group in row.groups] for claim in row.claims]).reshape(len(row.claims),
                                                                                            len(row.groups)))
        return out
    if measure == "entities":
        out = []
        for row in rows:
            texts = [" ".join(group) for group in row.groups]
            out.append(np.array([[entity_support(claim, text) for text in texts] for claim in row.claims])
                       .reshape(len(row.claims), len(row.groups)))
        return out
    raise ValueError(f"lexical measure must be one of {LEXICAL}, got {measure!r}")


def cosine_support(rows: list[Evidence], encoder: Any) -> list[np.ndarray]:
    """Per row, (n_claims, n_groups) of max over a group's units of (1 + cos(claim, unit)) / 2."""
    def unit(vectors: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    from much_metric.baselines.encoders import prefetch

    prefetch(encoder, [text for row in rows for text in (*row.claims, *(u for g in row.groups for u in g))])
    out = []
    for row in rows:
        units = [u for group in row.groups for u in group]
        owner = np.repeat(np.arange(len(row.groups)), [len(g) for g in row.groups])
        matrix = np.zeros((len(row.claims), len(row.groups)))
        if units and row.claims:
            similarity = (1.0 + unit(encoder.encode(list(row.claims))) @ unit(encoder.encode(units)).T) / 2.0
            np.maximum.at(matrix.T, owner, similarity.T)
        out.append(matrix)
    return out
