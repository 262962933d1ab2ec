"""CCP (delta 10, sigma 8) and SAR (sigma 8) on a MUCH-sized split with the ``microsoft/deberta-large-mnli``
ARCHITECTURE (random weights, no download), ours in float16 and bfloat16 vs the reference's loop, in one run.

* Model: ``DebertaForSequenceClassification`` built from deberta-large-mnli's published hyper-parameters (24 layers,
  hidden 1024, 16 heads, FFN 4096, relative attention c2p|p2c, 3 MNLI classes); random weights (timing only). The
  NLI tokenizer is the Llama-3 one of the test extra (offline); the embedding has its 128,256 rows instead of
  GPT-2 BPE's 50,265 -- a lookup, no compute -- and it cuts texts into a similar number of tokens.
* Split: MUCH-sized (default 4,873 answers, ~24.5 tokens each, ~119k tokens as MUCH): Mu-SHROOM answers of the four
  languages (Llama-3 tokens), each cut to a random length at a random offset, cycled; random sorted top-24
  probabilities with the sampled token among them.
* Ours: :func:`much_metric.baselines.methods.ccp.ccp` / :func:`~much_metric.baselines.methods.sar.sar` with an
  :class:`~much_metric.baselines.nli.NliScorer` in float16 and in bfloat16 (all pairs of the split, de-duplicated,
  length-sorted, token-budget batches).
* Reference structure, float32 as the reference loads its models: CCP = one padded batch per token (its <= 10
  candidate pairs); SAR = one batch per generation (its 2 x n_tokens pairs). Timed on the first
  ``--reference-samples`` answers and scaled per token to the split (the full loop would take ~hours); values
  checked against ours in float32 on the same answers.
* Relative cost: against the paper's generation time of MUCH (2,758 s for 4,873 samples, pro rata); the paper's
  CCP costs 124 % of it, the goal is <= 10 %.

    python benchmarks/bench_nli_gpu.py                      # GPU: the figures for BENCHMARKS.md
    python benchmarks/bench_nli_gpu.py --device cpu --small # seconds-long smoke run (tiny model, 6 answers)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's packages; the shared modules beside the scripts
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from nli_reference import MNLI_LABELS, llama3_tokenizer, nli_probabilities, reference_ccp  # noqa: E402

#: microsoft/deberta-large-mnli's config.json (hyper-parameters only; vocab_size follows the tokenizer).
DEBERTA_LARGE_MNLI = {
    "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512, "type_vocab_size": 0, "initializer_range": 0.02, "layer_norm_eps": 1e-7,
    "relative_attention": True, "max_relative_positions": -1, "position_biased_input": False,
    "pos_att_type": ["c2p", "p2c"], "pooler_hidden_size": 1024, "pooler_dropout": 0, "pooler_hidden_act": "gelu",
}
#: A tiny DeBERTa for the --small smoke run.
TINY = {**DEBERTA_LARGE_MNLI, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "pooler_hidden_size": 32}
PAPER_CCP_SHARE = 1.24


def _model(tokenizer, small: bool):
    import torch
    from transformers import DebertaConfig, DebertaForSequenceClassification

    config = DebertaConfig(**(TINY if small else DEBERTA_LARGE_MNLI), vocab_size=len(tokenizer),
                           pad_token_id=tokenizer.pad_token_id, id2label=MNLI_LABELS,
                           label2id={v: k for k, v in MNLI_LABELS.items()})
    torch.manual_seed(0)
    model = DebertaForSequenceClassification(config).eval()
    with torch.no_grad():  # random init is near-uniform: sharpen so that argmax decisions are not ties
        model.classifier.weight.mul_(30.0 if not small else 300.0)
    return model


def _rows(tokenizer, n: int, mean_tokens: float) -> list[dict]:
    from much_dataset import schema

    rng = np.random.default_rng(0)
    answers = []
    for path in sorted((ROOT / "data" / "mushroom").glob("mushroom.*-tst.v1.extra.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            answers.append(tokenizer.encode(json.loads(line)["model_output_text"], add_special_tokens=False))
    rows = []
    for index in range(n):
        answer = answers[index % len(answers)]
        length = int(np.clip(rng.geometric(1 / mean_tokens), 2, len(answer) + 1))
        start = int(rng.integers(0, max(len(answer) - length + 2, 1)))
        tokens = answer[start : start + length - 1] + [tokenizer.eos_token_id]
        m = len(tokens)
        probs = -np.sort(-rng.dirichlet(np.full(schema.TOP_K, 0.3), size=m), axis=1) * 0.95
        ids = rng.integers(0, len(tokenizer), size=(m, schema.TOP_K))
        for j, token in enumerate(tokens):
            ids[j][ids[j] == token] = (token + 1) % len(tokenizer)
            ids[j, min(int(rng.geometric(0.4)) - 1, schema.TOP_K - 1)] = token
        rows.append({schema.GENERATION_ID: f"gpu-{index}", schema.OUTPUT_TOKENS: tokens,
                     schema.LOGITS_TOKEN_IDS: ids.tolist(), schema.LOGITS_VALUES: probs.tolist()})
    return rows


def reference_sar(rows, model, tokenizer, device, *, sigma: int = 8):
    """The reference's structure: one batch per generation with its 2 x n_tokens pairs."""
    from much_dataset import schema

    out = []
    for row in rows:
        tokens = row[schema.OUTPUT_TOKENS]
        a, b, p_sampled = [], [], []
        for i, (token, ids, probs) in enumerate(zip(tokens, row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                                    strict=True)):
            prefix, suffix = tokenizer.decode(tokens[max(0, i - sigma) : i]), tokenizer.decode(tokens[i + 1 : i + 1 +
                                                                                                   sigma])
            a.append(prefix + tokenizer.decode([token]) + suffix)
            b.append(prefix + suffix)
            p_sampled.append(probs[ids.index(token)])
        p = nli_probabilities(model, tokenizer, a + b, b + a, device)[:, 2]
        n = len(tokens)
        relevance = ((1 - p[:n]) + (1 - p[n:])) / 2
        out.append((1 - np.asarray(p_sampled)) * relevance)
    return out


def _timed(fn, device):
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="torch device (default cuda if available)")
    parser.add_argument("--small", action="store_true", help="tiny DeBERTa, 6 answers: a seconds-long smoke run")
    parser.add_argument("--samples", type=int, default=None, help="answers in the split (default 4,873; 6 --small)")
    parser.add_argument("--reference-samples", type=int, default=None,
                        help="answers for the reference loops (default 100; 2 with --small)")
    parser.add_argument("--dtypes", default="float16,bfloat16", help="our dtypes (default float16,bfloat16)")
    parser.add_argument("--batch-size", type=int, default=None, help="NLI pairs per batch (default: library's)")
    parser.add_argument("--max-batch-tokens", type=int, default=None,
                        help="NLI padded tokens per batch (default: library's; a large GPU takes far more)")
    args = parser.parse_args(argv)

    import torch

    from much_metric.baselines import NliBatching, NliScorer, token_arrays
    from much_metric.baselines.methods.ccp import ccp
    from much_metric.baselines.methods.sar import sar
    from much_metric.baselines.runtime import PAPER_GENERATION_SECONDS, PAPER_N_SAMPLES

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    n_samples = args.samples or (6 if args.small else PAPER_N_SAMPLES)
    n_reference = min(args.reference_samples or (2 if args.small else 100), n_samples)
    gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else "none (CPU)"
    tokenizer = llama3_tokenizer()
    model = _model(tokenizer, args.small)
    rows = _rows(tokenizer, n_samples, mean_tokens=24.5)
    arrays = token_arrays(rows)
    reference_rows = rows[:n_reference]
    n_reference_tokens = sum(len(r["output_tokens"]) for r in reference_rows)
    generation = PAPER_GENERATION_SECONDS * n_samples / PAPER_N_SAMPLES
    options = {k: v for k, v in (("batch_size", args.batch_size), ("max_batch_tokens", args.max_batch_tokens)) if v}
    print(f"[nli-gpu] device {device}, GPU: {gpu}; torch {torch.__version__}; model: "
          f"{'tiny DeBERTa (smoke run)' if args.small else 'deberta-large-mnli architecture'} "
          f"({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, random weights); split "
          f"{n_samples:,} answers, {arrays.n_tokens:,} tokens; generation time {generation:,.0f}s (paper, pro rata)")

    # Reference loops (float32, as the reference) on the first answers, scaled per token to the split.
    model.to(device=device, dtype=torch.float32)
    reference_ccp(reference_rows[:1], model, tokenizer, device=device)  # warm-up
    seconds = {}
    seconds["ref_ccp"], ref_ccp = _timed(lambda: reference_ccp(reference_rows, model, tokenizer, device=device), device)
    seconds["ref_sar"], ref_sar = _timed(lambda: reference_sar(reference_rows, model, tokenizer, device), device)
    fp32 = NliScorer(model, tokenizer, device=device, dtype=torch.float32, progress=False,
                     batching=NliBatching(**options))
    ours_ccp32 = ccp(reference_rows, nli=fp32, tokenizer=tokenizer, delta=10, sigma=8)
    ours_sar32 = sar(reference_rows, nli=fp32, tokenizer=tokenizer, sigma=8)
    ccp_diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(ours_ccp32, ref_ccp,
                                                                                     strict=True))
    sar_diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(ours_sar32, ref_sar,
                                                                                     strict=True))
    scale = arrays.n_tokens / n_reference_tokens
    print(f"  reference loops, float32, {n_reference} answers / {n_reference_tokens:,} tokens: CCP "
          f"{seconds['ref_ccp']:.2f}s, SAR {seconds['ref_sar']:.2f}s -> scaled to the split: CCP "
          f"{seconds['ref_ccp'] * scale:,.0f}s "
          f"({seconds['ref_ccp'] * scale / generation:.0%} of generation), SAR {seconds['ref_sar'] * scale:,.0f}s; "
          f"ours float32 on the same answers: max |diff| CCP {ccp_diff:.1e}, SAR {sar_diff:.1e}")
    for dtype in [d.strip() for d in args.dtypes.split(",") if d.strip()]:
        if device == "cpu" and dtype == "float16":
            print("  float16: skipped on CPU (no half-precision matmul speed-up; bfloat16 runs)")
            continue
        scorer = NliScorer(model, tokenizer, device=device, dtype=dtype, progress=False,
                           batching=NliBatching(**options))
        ccp(reference_rows[:2], nli=scorer, tokenizer=tokenizer, delta=10, sigma=8)  # warm-up
        t_ccp, values = _timed(lambda scorer=scorer: ccp(arrays, nli=scorer, tokenizer=tokenizer, delta=10, sigma=8),
                               device)
        t_sar, _ = _timed(lambda scorer=scorer: sar(arrays, nli=scorer, tokenizer=tokenizer, sigma=8), device)
        flips = float(np.mean(np.concatenate(
            [np.abs(np.asarray(a) - np.asarray(b)) > 1e-6 for a, b in zip(values[:n_reference], ours_ccp32,
                                                                          strict=True)])))
        ref_ccp_split, ref_sar_split = seconds["ref_ccp"] * scale, seconds["ref_sar"] * scale
        print(f"  ours {dtype:<8}: CCP-10-8 {t_ccp:8.1f}s = {t_ccp / generation:6.1%} of generation (paper 124%, goal "
              f"<= 10%: {'OK' if t_ccp <= 0.1 * generation else 'MISSED'}), {ref_ccp_split / t_ccp:5.1f}x the "
              f"reference loop; SAR-8 {t_sar:7.1f}s = {t_sar / generation:6.1%}, {ref_sar_split / t_sar:5.1f}x; "
              f"tokens whose CCP differs from float32: {flips:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
