"""Claim consistency across samples: how much the N further answers to the same question support each claim
(SelfCheckGPT-NLI, LUQ, the multilingual detection seed's "pairwise" setting, UQLM's long-form scorers).

The evidence of a claim is its row's N samples (:mod:`much_metric.baselines.samples`); the reduction is that of
:mod:`much_metric.baselines._support` (max over a sample's units, mean over samples). Every value lies in [0, 1],
higher = less supported = more uncertain.

NLI against the samples' **sentences** (premise = sentence, hypothesis = claim; the seed's SummaC-zs scores, per
sample then averaged):

* ``sample_nli_ent`` = 1 - mean ENT, with ENT = max entailment probability over the sample's sentences;
* ``sample_nli_con`` = mean CON (max contradiction);
* ``sample_nli_diff`` = (1 - mean(ENT - CON)) / 2;
* ``sample_nli_unv`` = mean (1 - max(ENT, CON)) (unverifiable: neither entailed nor contradicted).

NLI against each **whole sample** (premise = the sample's text):

* ``sample_luq`` = 1 - mean e / (e + c) (LUQ's score; UQLM's unit-response "contrasted_entailment"; a pair with
  e + c = 0 gives 0.5);
* ``sample_graph_degree`` = 1 - the claim's degree centrality in the claim-response bipartite graph of UQLM's graph
  scorer (Jiang et al., 2024): responses = the answer and its samples, edge weight = entailment probability when it
  is >= 0.5, degree = sum of weights / number of responses.

Without NLI:

* ``sample_cosine`` = 1 - mean over samples of max over its sentences of (1 + cos(claim, sentence)) / 2 (UQLM's
  matched-unit ``cosine_sim``), with the run's encoder;
* ``sample_rouge1`` / ``sample_rougel`` = 1 - mean over samples of max over its sentences of ROUGE-1 (stopwords
  removed) / ROUGE-L precision of the claim (:mod:`much_metric.baselines._lexical`);
* ``sample_entities`` = 1 - mean over samples of the share of the claim's named entities the sample mentions
  (claims without an entity score 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines._support import (
    LEXICAL,
    NLI_SCORES,
    Evidence,
    cosine_support,
    lexical_support,
    nli_support,
    nli_uncertainty,
)
from much_metric.baselines.claims import answer_texts, claim_signal, claim_texts
from much_metric.baselines.registry import Baseline

__all__ = ["GRAPH_EDGE_THRESHOLD"]

#: UQLM's ``binary_edge_threshold``: entailment probabilities below it are no edge.
GRAPH_EDGE_THRESHOLD = 0.5


def _sentence_rows(arrays: TokenArrays, samples: Any, tokenizer: Any, method: str) -> list[Evidence]:
    claims = claim_texts(arrays, tokenizer, method)
    return [Evidence(gid, texts, samples.sentences(gid)) for gid, texts in zip(arrays.generation_ids, claims,
                                                                                strict=True)]


def _nli(arrays: TokenArrays, *, score: str, samples: Any, nli: Any, tokenizer: Any) -> list[np.ndarray]:
    rows = _sentence_rows(arrays, samples, tokenizer, f"sample_nli_{score}")
    return claim_signal(arrays, [nli_uncertainty(ent, con, score) for ent, con in nli_support(nli, rows)])


def _luq(arrays: TokenArrays, *, samples: Any, nli: Any, tokenizer: Any) -> list[np.ndarray]:
    claims = claim_texts(arrays, tokenizer, "sample_luq")
    rows = [Evidence(gid, texts, [[text] for text in samples.of(gid)])
            for gid, texts in zip(arrays.generation_ids, claims, strict=True)]
    values = []
    for ent, con in nli_support(nli, rows):
        total = ent + con
        contrasted = np.divide(ent, total, out=np.full_like(ent, 0.5), where=total > 0)
        values.append(1.0 - contrasted.mean(axis=1))
    return claim_signal(arrays, values)


def _graph_degree(arrays: TokenArrays, *, samples: Any, nli: Any, tokenizer: Any) -> list[np.ndarray]:
    claims = claim_texts(arrays, tokenizer, "sample_graph_degree")
    answers = answer_texts(arrays, tokenizer, "sample_graph_degree")
    rows = [Evidence(gid, texts, [[answer], *[[text] for text in samples.of(gid)]])
            for gid, texts, answer in zip(arrays.generation_ids, claims, answers, strict=True)]
    values = []
    for ent, _ in nli_support(nli, rows):
        weights = np.where(ent >= GRAPH_EDGE_THRESHOLD, ent, 0.0)
        values.append(1.0 - weights.sum(axis=1) / ent.shape[1])
    return claim_signal(arrays, values)


def _cosine(arrays: TokenArrays, *, samples: Any, encoder: Any, tokenizer: Any) -> list[np.ndarray]:
    rows = _sentence_rows(arrays, samples, tokenizer, "sample_cosine")
    return claim_signal(arrays, [1.0 - m.mean(axis=1) if m.shape[1] else np.ones(m.shape[0])
                                   for m in cosine_support(rows, encoder)])


def _lexical_method(arrays: TokenArrays, *, lexical: str, samples: Any, tokenizer: Any) -> list[np.ndarray]:
    rows = _sentence_rows(arrays, samples, tokenizer, f"sample_{lexical}")
    return claim_signal(arrays, [1.0 - m.mean(axis=1) if m.shape[1] else np.ones(m.shape[0])
                                   for m in lexical_support(rows, lexical)])


_LEXICAL_LABEL = {"rouge1": "ROUGE-1", "rougel": "ROUGE-L", "entities": "entities"}

BASELINES = (
    Baseline(name="sample_nli_{score}", compute=_nli, params={"score": "|".join(NLI_SCORES)},
             display=lambda p: f"Samples NLI {p['score'].upper()}", needs=("samples", "nli", "tokenizer"),
             top_k=0, level="claim", order=310,
             defaults=tuple(f"sample_nli_{s}" for s in NLI_SCORES),
             description="SummaC-zs over the samples' sentences (ENT/CON/DIFF/UNV of the multilingual seed), mean "
                         "over samples"),
    Baseline(name="sample_luq", compute=_luq, display="LUQ (samples)", needs=("samples", "nli", "tokenizer"),
             top_k=0, level="claim", order=311,
             description="1 - mean e/(e+c), premise = each whole sample (LUQ; UQLM unit response)"),
    Baseline(name="sample_graph_degree", compute=_graph_degree, display="Graph degree (samples)",
             needs=("samples", "nli", "tokenizer"), top_k=0, level="claim", order=312,
             description="1 - degree centrality in the claim-response entailment graph (UQLM graph scorer)"),
    Baseline(name="sample_cosine", compute=_cosine, display="Samples cosine", needs=("samples", "encoder", "tokenizer"),
             top_k=0, level="claim", order=313,
             description="1 - mean over samples of max (1+cos)/2 with its sentences (UQLM matched unit)"),
    Baseline(name="sample_{lexical}", compute=_lexical_method, params={"lexical": "|".join(LEXICAL)},
             display=lambda p: "Samples " + _LEXICAL_LABEL.get(p["lexical"], p["lexical"]),
             needs=("samples", "tokenizer"), top_k=0, level="claim", order=314,
             defaults=tuple(f"sample_{m}" for m in LEXICAL),
             description="1 - mean over samples of ROUGE-1/ROUGE-L precision (best sentence) or entity overlap"),
)
