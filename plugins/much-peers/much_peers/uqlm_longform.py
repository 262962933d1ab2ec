"""UQLM's long-form scorers (``uqlm.longform``) on claims and samples given as texts, with an NLI model and an
encoder given as objects: the peer side of the toolkit's sampling-consistency differential tests (tests/peers/).

UQLM builds its NLI model (``uqlm.nli.NLI``) and its cosine scorer from hub names; here the scorers are created
without their constructors and handed the caller's models, so that both sides score **the same entailment inputs**:

* the NLI stand-in answers ``predict_batch([(premise, hypothesis), ...])`` with probabilities in UQLM's column order
  ``[contradiction, neutral, entailment]`` (``uqlm.nli.NLI.label_mapping``), reordered from the caller's model by
  its own ``id2label``. UQLM itself never reads ``id2label``: it takes column 0 as contradiction and column -1 as
  entailment, right for ``microsoft/deberta-large-mnli`` and inverted for a model ordered otherwise (docs/peers.md,
  "Peer bugs found");
* the cosine scorer's ``model`` is the caller's sentence-transformers model.

Functions return UQLM's own outputs (``ClaimScores.to_dict()`` row means, graph ``ClaimScore`` scores).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["UqlmNli", "graph_scores", "matched_unit_scores", "unit_response_scores"]


class UqlmNli:
    """``uqlm.nli.NLI``'s interface over any scorer with ``id2label`` and ``predict_proba(premises, hypotheses)``."""

    label_mapping = ["contradiction", "neutral", "entailment"]

    def __init__(self, nli: Any, max_length: int = 2000) -> None:
        from much_metric.baselines.nli import nli_label_indices

        self.nli = nli
        self.max_length = max_length
        labels = nli_label_indices({int(k): v for k, v in nli.id2label.items()})
        if labels.neutral is None:
            raise ValueError("UQLM's scorers read three NLI classes; this model is binary")
        self.order = [labels.contradiction, labels.neutral, labels.entailment]

    def predict_batch(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.empty((0, 3))
        premises = [p[: self.max_length] for p, _ in pairs]  # UQLM's own string truncation
        hypotheses = [h[: self.max_length] for _, h in pairs]
        return np.asarray(self.nli.predict_proba(premises, hypotheses))[:, self.order]

    def predict(self, premise: str, hypothesis: str) -> np.ndarray:
        return self.predict_batch([(premise, hypothesis)])


def unit_response_scores(claim_sets: list[list[str]], sampled_responses: list[list[str]], nli: Any) -> dict[str, Any]:
    """UQLM's ``UnitResponseScorer`` (LUQ): per claim, the mean over the sampled responses of entailment,
    non-contradiction and contrasted entailment (premise = the whole response)."""
    from uqlm.longform.luq.unit_response import UnitResponseScorer

    scorer = UnitResponseScorer.__new__(UnitResponseScorer)
    scorer.nli, scorer.nli_model_name, scorer.progress_bar, scorer.matched_claim = UqlmNli(nli), "given", None, False
    return scorer.evaluate(claim_sets=claim_sets, sampled_responses=sampled_responses).to_dict()


def matched_unit_scores(claim_sets: list[list[str]], sampled_claim_sets: list[list[list[str]]], *, nli: Any = None,
                        sentence_model: Any = None) -> dict[str, Any]:
    """UQLM's ``MatchedUnitScorer`` (LUQ-Atomic): per claim, the mean over samples of the max over the sample's units
    of the NLI scores (``nli``) and of ``(1 + cos) / 2`` (``sentence_model``, a sentence-transformers model)."""
    from uqlm.black_box.cosine import CosineScorer
    from uqlm.longform.luq.matched_unit import MatchedUnitScorer

    scorer = MatchedUnitScorer.__new__(MatchedUnitScorer)
    scorer.matched_claim, scorer.progress_bar, scorer.bert_scorer = True, None, None
    scorer.nli = None if nli is None else UqlmNli(nli)
    scorer.consistency_functions = [name for name, on in (("nli", nli), ("cosine_sim", sentence_model)) if on]
    scorer.cosine_scorer = None
    if sentence_model is not None:
        cosine = CosineScorer.__new__(CosineScorer)
        cosine.model, cosine.transformer, cosine.max_length = sentence_model, "given", 2000
        scorer.cosine_scorer = cosine
    return scorer.evaluate(claim_sets=claim_sets, sampled_claim_sets=sampled_claim_sets).to_dict()


def graph_scores(claim_sets: list[list[str]], response_sets: list[list[str]], nli: Any) -> list[list[dict[str, float]]]:
    """UQLM's ``GraphScorer``: per claim, its centralities in the claim-response entailment graph (the claims are the
    master claim set; edges where entailment >= 0.5)."""
    from uqlm.longform.graph.graph_scorer import GraphScorer

    scorer = GraphScorer.__new__(GraphScorer)
    scorer.nli_llm, scorer.nli = None, UqlmNli(nli)
    result = asyncio.run(scorer.evaluate(original_claim_sets=claim_sets, master_claim_sets=claim_sets,
                                         response_sets=response_sets))
    return [[dict(claim.scores) for claim in claims] for claims in result]
