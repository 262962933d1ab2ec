"""Shared helpers of the baseline tests: a stub NLI, a tiny random DeBERTa NLI model, real-text rows, and
straightforward per-token CCP / SAR loops written from docs/reference-behaviour.md (the reference's structure)."""

from __future__ import annotations

import contextlib
import functools
import json
import zlib
from pathlib import Path

import numpy as np

from much_dataset import schema

MUSHROOM = Path(__file__).resolve().parents[2] / "data" / "mushroom"
LABELS_3 = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


def fake_decode(batch):
    """A decoder whose output shows exactly which ids were decoded: [5, 7] -> ' w5 w7'."""
    return ["".join(f" w{i}" for i in ids) for ids in batch]


class HashNli:
    """Deterministic stub NLI: class probabilities are a fixed function of the (premise, hypothesis) strings.

    Identical strings are always entailment (as a real model would say). ``calls`` records every pair asked.
    """

    def __init__(self, id2label=None):
        self.id2label = dict(id2label or LABELS_3)
        self.entail = next(i for i, name in self.id2label.items() if name.lower().startswith("entail"))
        self.calls: list[tuple[str, str]] = []

    def one(self, premise: str, hypothesis: str) -> np.ndarray:
        k = len(self.id2label)
        seed = zlib.crc32(f"{premise}\x00{hypothesis}".encode())
        logits = np.random.default_rng(seed).normal(0, 2, k)
        if premise == hypothesis:
            logits[self.entail] += 10
        p = np.exp(logits - logits.max())
        return p / p.sum()

    def predict_proba(self, premises, hypotheses):
        self.calls.extend(zip(premises, hypotheses, strict=True))
        rows = [self.one(p, h) for p, h in zip(premises, hypotheses, strict=True)]
        return np.array(rows).reshape(-1, len(self.id2label))


def _dec(decode, ids):
    return decode([list(map(int, ids))])[0]


def loop_ccp(rows, nli_one, decode, *, delta, sigma, reference_window=False, id2label=LABELS_3):
    """Per-token CCP as docs/reference-behaviour.md#signals describes it: one NLI call per (token, candidate)."""
    names = {i: n.lower() for i, n in id2label.items()}
    out = []
    for row in rows:
        tokens = list(row[schema.OUTPUT_TOKENS])
        values = []
        for i, (token, ids, probs) in enumerate(zip(tokens, row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                                    strict=True)):
            suffix_end = i + sigma if reference_window else i + 1 + sigma
            prefix, suffix = _dec(decode, tokens[max(0, i - sigma) : i]), _dec(decode, tokens[i + 1 : suffix_end])
            candidates = list(zip(ids[:delta], probs[:delta], strict=True))
            if token not in list(ids[:delta]):
                candidates.append((token, probs[list(ids).index(token)]))
            token_text = _dec(decode, [token])
            e = c = 0.0
            forced = False
            for candidate, p in candidates:
                text = _dec(decode, [candidate])
                if not forced and text == token_text:
                    forced = True
                    e += p
                    continue
                label = names[int(np.argmax(nli_one(prefix + token_text + suffix, prefix + text + suffix)))]
                if label.startswith("entail"):
                    e += p
                elif label.startswith(("contradict", "not", "non")):
                    c += p
            values.append(1 - e / (e + c))
        out.append(np.array(values))
    return out


def loop_sar(rows, nli_one, decode, *, sigma, reference_window=False, entail=2):
    """Per-token SAR as docs/reference-behaviour.md#signals describes it."""
    out = []
    for row in rows:
        tokens = list(row[schema.OUTPUT_TOKENS])
        values = []
        for i, (token, ids, probs) in enumerate(zip(tokens, row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                                    strict=True)):
            suffix_end = i + sigma if reference_window else i + 1 + sigma
            prefix, suffix = _dec(decode, tokens[max(0, i - sigma) : i]), _dec(decode, tokens[i + 1 : suffix_end])
            a = prefix + _dec(decode, [token]) + suffix
            b = prefix + suffix
            relevance = ((1 - nli_one(a, b)[entail]) + (1 - nli_one(b, a)[entail])) / 2
            values.append((1 - probs[list(ids).index(token)]) * relevance)
        out.append(np.array(values))
    return out


def mushroom_rows(tokenizer, n: int, *, seed: int = 0, lang: str = "en", repeat_first: bool = True,
                  max_tokens: int = 20) -> list[dict]:
    """MUCH-shaped rows whose output tokens are real Mu-SHROOM answers encoded by ``tokenizer`` (EOS appended).

    Candidates are the sampled token plus random vocabulary ids, with random sorted probabilities (the sampled
    token sometimes below rank 10, to exercise CCP's appended candidate). With ``repeat_first``, the first row is
    repeated under another id (duplicate NLI pairs, as MUCH's repeated answers produce).
    """
    rng = np.random.default_rng(seed)
    lines = (MUSHROOM / f"mushroom.{lang}-tst.v1.extra.jsonl").read_text(encoding="utf-8").splitlines()
    rows = []
    vocab = len(tokenizer)
    eos = tokenizer.eos_token_id
    for index, line in enumerate(lines[:n]):
        text = json.loads(line)["model_output_text"]
        tokens = tokenizer.encode(text, add_special_tokens=False)[:max_tokens] + [eos]
        m = len(tokens)
        probs = -np.sort(-rng.dirichlet(np.full(schema.TOP_K, 0.3), size=m), axis=1) * 0.95
        ids = np.stack([rng.choice(vocab, schema.TOP_K, replace=False) for _ in range(m)])
        ranks = np.minimum(rng.geometric(0.35, m) - 1, schema.TOP_K - 1)
        for j, (token, rank) in enumerate(zip(tokens, ranks, strict=True)):
            ids[j][ids[j] == token] = (token + 1) % vocab  # keep ids unique
            ids[j, rank] = token
        rows.append({schema.GENERATION_ID: f"mushroom-{lang}-{index}", schema.OUTPUT: text,
                     schema.OUTPUT_TOKENS: tokens, schema.LOGITS_TOKEN_IDS: ids.tolist(),
                     schema.LOGITS_VALUES: probs.tolist()})
    if repeat_first and rows:
        rows.append({**rows[0], schema.GENERATION_ID: "mushroom-duplicate"})
    return rows


@contextlib.contextmanager
def one_torch_thread():
    """Tiny models run no faster on 2 threads, and 2 spinning threads crawl on a shared, oversubscribed CPU."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.cache
def tiny_nli_parts(labels: tuple[tuple[int, str], ...] = tuple(LABELS_3.items())):
    """A tiny randomly initialised DeBERTa-v2 sequence classifier (seeded) and a real tokenizer with a pad token."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, PreTrainedTokenizerFast

    from tests import assets

    assets.require("llama3")
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(assets.llama3_tokenizer_json()),
                                        pad_token="<|reserved_special_token_0|>", eos_token="<|eot_id|>")
    id2label = dict(labels)
    config = DebertaV2Config(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id, id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    model = DebertaV2ForSequenceClassification(config).eval()
    # Random init gives near-uniform outputs; sharpen the classifier so that argmax decisions are not ties.
    with torch.no_grad():
        model.classifier.weight.mul_(300.0)
    return model, tokenizer
