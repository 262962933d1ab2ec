"""Shared helpers of the metric tests: an independent per-claim loop (docs/reference-behaviour.md#aggregators) and real
Mu-SHROOM-derived rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from much_dataset import schema

MUSHROOM = Path(__file__).resolve().parents[2] / "data" / "mushroom"


def loop_aggregate(scores, chunks, mask=None, *, aggregator="product", stopword_handling="null",
                   drop_last_chunk=True):
    """Straightforward per-claim Python loop implementing the reference formulas of docs/reference-behaviour.md (the
    reference's structure)."""
    scores = [float(s) for s in scores]
    if mask is not None and stopword_handling == "null":
        scores = [0.0 if m else s for s, m in zip(scores, mask, strict=True)]
    out = []
    for chunk in chunks[:-1] if drop_last_chunk else chunks:
        values = scores[chunk[0] : chunk[-1] + 1]
        if mask is not None and stopword_handling == "exclude":
            kept = [s for s, m in zip(values, mask[chunk[0] : chunk[-1] + 1], strict=True) if not m]
            values = kept or values
        n = len(values)
        survival = 1.0
        for s in values:
            survival *= 1.0 - s
        if aggregator == "product":
            out.append(1.0 - survival)
        elif aggregator == "mean":
            out.append(sum(values) / n)
        elif aggregator == "max":
            out.append(max(values))
        else:
            out.append(1.0 - (survival + 1e-5) ** (1.0 / n))
    return out


def mushroom_rows(limit: int | None = None, seed: int = 0) -> list[dict]:
    """MUCH-shaped rows built from the vendored Mu-SHROOM test outputs (real LLM text, logits and human spans).

    Token scores are the per-sample min-max normalised negative logits of the emitted tokens (in [0, 1], higher =
    more uncertain); claims are runs of 2-7 tokens (seeded), a claim is hallucinated (-1) when its characters
    overlap a human-annotated hallucination span; an EOS claim (one token, label +1) closes every sample. The
    stopword mask is whether the token's text is a short function word (real text, so it is realistic).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for path in sorted(MUSHROOM.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            logits = np.asarray(record["model_output_logits"], dtype=np.float64)
            tokens = record["model_output_tokens"][: len(logits)]
            logits = logits[: len(tokens)]
            if len(tokens) < 3:
                continue
            texts = [t.replace("\u0120", " ").replace("\u010a", "\n").replace("\u2581", " ") for t in tokens]
            ends = np.cumsum([len(t) for t in texts])
            starts = ends - np.array([len(t) for t in texts])
            spans = record["hard_labels"]
            halluc_token = np.array(
                [any(start < span_end and span_start < end for span_start, span_end in spans)
                 for start, end in zip(starts, ends, strict=True)]
            )
            uncertainty = (logits.max() - logits) / (logits.max() - logits.min() + 1e-9)
            chunks, position = [], 0
            while position < len(tokens):
                size = int(min(len(tokens) - position, rng.integers(2, 8)))
                chunks.append(list(range(position, position + size)))
                position += size
            labels = [schema.HALLUCINATED if halluc_token[c].any() else schema.CORRECT for c in chunks]
            n = len(tokens)
            rows.append(
                {
                    schema.GENERATION_ID: record["id"],
                    schema.LANG: record["lang"].lower(),
                    schema.GENERATION_CONFIG: record["model_id"],
                    "scores": [*uncertainty.tolist(), 0.01],
                    schema.TOKEN_CHUNKS: [*chunks, [n]],
                    schema.LABELS: [*labels, schema.CORRECT],
                    schema.STOPWORD_MASK: [t.strip().lower() in {"the", "a", "of", "de", "la", "der", "die", "und",
                                                                   "y", "el", "et", "le", ",", ".", ""}
                                           for t in texts] + [False],
                }
            )
            if limit is not None and len(rows) >= limit:
                return rows
    return rows


def columns(rows: list[dict]) -> dict[str, list]:
    keys = rows[0].keys()
    return {key: [row[key] for row in rows] for key in keys}
