"""Reference-based claim scores (the multilingual detection seed's "reference-based" setting): each claim against
its row's Wikipedia article or RAG chunks, as ``python -m builder wiki`` and ``context`` store them
(:mod:`much_metric.baselines.reference`; ``much run --reference <builder folder>``).

``reference_{part}_...`` with ``part`` = ``article`` (the article's sentences) or ``chunks`` (the sentences of the
row's context chunks); the evidence is one group, so the scores are the seed's own (no average):

* ``reference_{part}_nli_ent`` = 1 - ENT, ENT = max over the reference sentences of the entailment probability
  (premise = sentence, hypothesis = claim); ``_nli_con`` = CON (max contradiction); ``_nli_diff`` =
  (1 - (ENT - CON)) / 2; ``_nli_unv`` = UNV = 1 - max(ENT, CON);
* ``reference_{part}_rouge1`` / ``_rougel`` = 1 - the best sentence's ROUGE-1 (stopwords removed) / ROUGE-L
  precision of the claim; ``reference_{part}_entities`` = 1 - the share of the claim's named entities the reference
  mentions; ``reference_{part}_cosine`` = 1 - max (1 + cos) / 2 with the run's encoder.

A page the builder recorded ``missing`` or ``disambiguation`` has no sentences: its claims find no support (ENT 0,
so ``_nli_ent`` and ``_nli_unv`` are 1). Real numbers need the articles, hence the internet (the MediaWiki API).
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
from much_metric.baselines.claims import claim_signal, claim_texts
from much_metric.baselines.reference import PARTS
from much_metric.baselines.registry import Baseline

__all__: list[str] = []

_PART = "|".join(PARTS)


def _rows(arrays: TokenArrays, reference: Any, tokenizer: Any, part: str, method: str) -> list[Evidence]:
    if reference is None:
        raise ValueError(f"{method} needs the reference (much run --reference FOLDER)")
    claims = claim_texts(arrays, tokenizer, method)
    return [Evidence(gid, texts, [reference.units(gid, part)])
            for gid, texts in zip(arrays.generation_ids, claims, strict=True)]


def _nli(arrays: TokenArrays, *, part: str, score: str, **resources: Any) -> list[np.ndarray]:
    """``resources``: reference, nli, tokenizer (the baseline's needs)."""
    rows = _rows(arrays, resources["reference"], resources["tokenizer"], part, f"reference_{part}_nli_{score}")
    return claim_signal(arrays, [nli_uncertainty(ent, con, score)
                                   for ent, con in nli_support(resources["nli"], rows)])


def _lexical(arrays: TokenArrays, *, part: str, lexical: str, reference: Any, tokenizer: Any) -> list[np.ndarray]:
    rows = _rows(arrays, reference, tokenizer, part, f"reference_{part}_{lexical}")
    return claim_signal(arrays, [1.0 - m[:, 0] for m in lexical_support(rows, lexical)])


def _cosine(arrays: TokenArrays, *, part: str, reference: Any, encoder: Any, tokenizer: Any) -> list[np.ndarray]:
    rows = _rows(arrays, reference, tokenizer, part, f"reference_{part}_cosine")
    return claim_signal(arrays, [1.0 - m[:, 0] for m in cosine_support(rows, encoder)])


_LEXICAL_LABEL = {"rouge1": "ROUGE-1", "rougel": "ROUGE-L", "entities": "entities"}

BASELINES = (
    Baseline(name="reference_{part}_nli_{score}", compute=_nli, params={"part": _PART, "score": "|".join(NLI_SCORES)},
             display=lambda p: f"Reference {p['part']} NLI {p['score'].upper()}",
             needs=("reference", "nli", "tokenizer"), top_k=0, level="claim", order=320,
             defaults=tuple(f"reference_{part}_nli_{s}" for part in PARTS for s in NLI_SCORES),
             description="SummaC-zs against the Wikipedia article's / RAG chunks' sentences (ENT/CON/DIFF/UNV)"),
    Baseline(name="reference_{part}_{lexical}", compute=_lexical, params={"part": _PART, "lexical": "|".join(LEXICAL)},
             display=lambda p: f"Reference {p['part']} {_LEXICAL_LABEL.get(p['lexical'], p['lexical'])}",
             needs=("reference", "tokenizer"), top_k=0, level="claim", order=321,
             defaults=tuple(f"reference_{part}_{m}" for part in PARTS for m in LEXICAL),
             description="1 - ROUGE-1/ROUGE-L precision (best sentence) or entity overlap with the reference"),
    Baseline(name="reference_{part}_cosine", compute=_cosine, params={"part": _PART},
             display=lambda p: f"Reference {p['part']} cosine", needs=("reference", "encoder", "tokenizer"),
             top_k=0, level="claim", order=322,
             defaults=tuple(f"reference_{part}_cosine" for part in PARTS),
             description="1 - max (1+cos)/2 between the claim and the reference's sentences"),
)
