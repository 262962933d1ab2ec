"""import-mushroom: Mu-SHROOM outputs teacher-forced through a causal LM, segmented and labelled
(docs/reference-behaviour.md#mushroom-import).

For every Mu-SHROOM row: prompt + (original output text + the observer's EOS text) go through the observer LM in one
forward pass; per output token, softmax(raw logits) over the full vocabulary (no temperature), top-24 kept. Claims
come from :func:`much_metric.segmentation.segment` (``--compat 0.2.1`` by default, as MUCH); a claim is labelled -1
when its characters intersect a hallucinated span (``--labels reference``: soft-label probability >= 1.0, ends
inclusive, the reference's rule; ``--labels hard``: Mu-SHROOM's majority ``hard_labels``). Writes
``generations.jsonl``, ``segments.jsonl``, ``labels.mushroom.jsonl`` (with both label variants and each claim's
maximum soft-label probability) and ``configs.jsonl``.

Observer: without ``--observer`` each row is scored by its own generating model (the reference; needs the 7-8B
models). With ``--observer MODEL`` every row is scored by that one proxy model (the embedded sample uses
SmolLM2-135M-Instruct): the token ids and probabilities are then the PROXY's, not the generator's. Config IDs:
reference mode hashes ``GenerationConfig(model_name=<generator>, seed=<lang code>)`` (the reference's 12 configs);
proxy mode hashes ``model_name="<generator>|observer=<observer name>"`` so proxy-scored rows never share an ID with
reference ones. The config rows also name ``source_model`` and ``observer_model``.

Tokens ranked below 24 by the observer (``--out-of-top``): ``drop`` drops the row (the reference), ``swap`` keeps
the row and puts the observed token (with its true probability) in place of the 24th candidate, so that the sampled
token is among the 24 as MUCH requires (a proxy model often ranks a foreign model's token low).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from builder import _mushroom_labels as ml
from builder.configs import MUSHROOM_LANG_SEED, MUSHROOM_MODEL_MAP, MUSHROOM_SKIPPED_MODELS, GenerationConfig
from builder.generation.rows import generation_id
from builder.questions import DEFAULT_SOURCE, read_mushroom
from builder.store import JsonlStore, Shard
from much_dataset import schema
from much_metric import mushroom
from much_metric.fileio import Output, check_outputs

__all__ = ["add_arguments", "run", "teacher_force", "OUT_OF_TOP"]

#: What the step reads and writes (``--out``-relative), for the output rules of :mod:`builder.cli`.
READS = ("source", "observer")
WRITES = ("generations*.jsonl", "segments*.jsonl", "labels.*.jsonl", "configs.jsonl")

OUT_OF_TOP = ("drop", "swap")
JUDGE = "mushroom"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", action="append", default=None,
                        help="Mu-SHROOM JSONL file or folder (repeatable; default: data/mushroom)")
    parser.add_argument("--observer", default=None,
                        help="proxy observer LM (hub id, folder or .gguf); default: each row's own model")
    parser.add_argument("--observer-name", default=None,
                        help="name of the observer in config IDs (default: --observer)")
    parser.add_argument("--labels", choices=ml.RULES, default="reference",
                        help="which rule fills `labels` (both are stored in labels.mushroom.jsonl)")
    parser.add_argument("--soft-threshold", type=float, default=1.0, help="reference rule threshold (1.0)")
    parser.add_argument("--compat", default="0.2.1", help="segmenter compatibility version")
    parser.add_argument("--out-of-top", choices=OUT_OF_TOP, default="drop")
    parser.add_argument("--include-skipped-models", action="store_true",
                        help=f"also import {sorted(MUSHROOM_SKIPPED_MODELS)} (skipped by the reference)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (fix it for bit-reproducibility)")
    parser.add_argument("--device", default="cpu", help="the reference teacher-forces on cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--limit", type=int, default=None)


class _Dropped(ValueError):
    """The row breaks the top-24 rule and ``--out-of-top drop`` is in force (the reference's behaviour)."""


def _prompt(tokenizer, source_model: str, question: str, *, proxy: bool) -> str:
    """The prompt the generator saw (reference mode, docs/reference-behaviour.md#mushroom-import) or the observer's
    plain user chat (proxy mode)."""
    name = source_model.lower()
    if not proxy:
        if "pythia" in name:
            return f"<human>: {question}\n<bot>:"
        if "falcon" in name or "bloom" in name:
            return f"{question}\n"
        if "mistral-7b-instruct" in name:
            return f"[INST] {question} [/INST]"
    return tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                         add_generation_prompt=True)


def _output_text(row: dict[str, Any], eos_text: str, *, proxy: bool) -> str:
    text = mushroom.output_text(row)
    if not proxy and "pythia" in row["model_id"].lower():
        return text  # the reference appends no EOS for Pythia
    return text + eos_text


def teacher_force(llm, prompt: str, output_text: str, eos_id: int | None):
    """Token ids of ``output_text`` and the observer's top-24 candidates for each (one forward pass).

    ``output_text`` may end with the EOS text; it is then encoded as the single EOS id. Returns ``(ids, cand_ids,
    cand_probs, ranks, chosen_probs)``: exactly 24 candidates per token. Raises ``ValueError`` if the tokens do not
    decode back to ``output_text``.
    """
    import torch

    from builder._llm import top_candidates

    tokenizer = llm.tokenizer
    eos_text = tokenizer.decode([eos_id]) if eos_id is not None else ""
    body = output_text[: -len(eos_text)] if eos_text and output_text.endswith(eos_text) else output_text
    ids = tokenizer.encode(body, add_special_tokens=False) + ([eos_id] if body != output_text else [])
    if not ids:
        raise ValueError("empty output")
    if tokenizer.decode(ids, skip_special_tokens=False) != output_text:
        raise ValueError("the observer's tokens do not decode back to the output text")
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    full = torch.tensor([prompt_ids + ids], device=llm.device)
    with torch.inference_mode():
        logits = llm.model(input_ids=full).logits[0, len(prompt_ids) - 1: -1]
    cand_ids, cand_probs, ranks, chosen_probs = top_candidates(logits, torch.tensor(ids), temperature=1.0,
                                                               extend=False)
    return ids, cand_ids, cand_probs, ranks, chosen_probs


def _swap_in(cand_ids, cand_probs, ids, ranks, chosen_probs):
    # Keep 24 candidates; where the observed token ranked lower, it replaces the 24th (its probability is <= the
    # 24th's, so rows stay sorted).
    k = schema.TOP_K
    out_ids, out_probs = [], []
    for row_ids, row_probs, token, rank, prob in zip(cand_ids, cand_probs, ids, ranks, chosen_probs, strict=True):
        if rank >= k:
            out_ids.append(row_ids[: k - 1] + [token])
            out_probs.append(row_probs[: k - 1] + [prob])
        else:
            out_ids.append(row_ids[:k])
            out_probs.append(row_probs[:k])
    return out_ids, out_probs


def _token_ends(tokenizer, ids: list[int]) -> list[int]:
    return [len(tokenizer.decode(ids[: i + 1], skip_special_tokens=False)) for i in range(len(ids))]


def _configs(row: dict[str, Any], observer_name: str | None) -> tuple[GenerationConfig, str]:
    lang = row["lang"].lower()
    source = MUSHROOM_MODEL_MAP.get(row["model_id"], row["model_id"])
    name = source if observer_name is None else f"{source}|observer={observer_name}"
    return GenerationConfig(model_name=name, seed=MUSHROOM_LANG_SEED[lang]), source


def process_row(llm, row: dict[str, Any], *, observer_name: str | None, rule: str, threshold: float, compat: str,
                out_of_top: str) -> tuple[dict, dict, dict, dict]:
    """One Mu-SHROOM row -> (config record, generation record, segments record, labels record)."""
    import numpy as np

    from builder._llm import eos_token_ids
    from much_dataset.stopwords import stopword_mask
    from much_metric.segmentation import segment

    proxy = observer_name is not None
    config, source = _configs(row, observer_name)
    tokenizer = llm.tokenizer
    eos = (eos_token_ids(llm.model, tokenizer) or [None])[0]
    eos_text = tokenizer.decode([eos]) if eos is not None else ""
    prompt = _prompt(tokenizer, source, row["model_input"], proxy=proxy)
    output = _output_text(row, eos_text, proxy=proxy)
    ids, cand_ids, cand_probs, ranks, chosen_probs = teacher_force(llm, prompt, output, eos)
    worst = int(np.argmax(ranks))
    if ranks[worst] >= schema.TOP_K:
        if out_of_top == "drop":
            raise _Dropped(f"output token {worst} ranks {ranks[worst]} (>= 24) under the observer; dropped as the "
                             "reference does (--out-of-top swap keeps such rows)")
        cand_ids, cand_probs = _swap_in(cand_ids, cand_probs, ids, ranks, chosen_probs)
    record = {
        schema.GENERATION_CONFIG: config.id, "question_id": None, schema.LANG: row["lang"].lower(),
        schema.WIKI_URL: row.get("wikipedia_url") or "None", schema.PROMPT: row["model_input"],
        schema.OUTPUT: output, schema.OUTPUT_TOKENS: ids, schema.LOGITS_TOKEN_IDS: cand_ids,
        schema.LOGITS_VALUES: cand_probs,
    }
    from builder.configs import question_id

    record["question_id"] = question_id(record[schema.LANG], record[schema.PROMPT], record[schema.WIKI_URL])
    gid = generation_id(record)
    generation = {schema.GENERATION_ID: gid, **record, "mushroom_id": row["id"], "source_model": row["model_id"]}
    chunks = segment(output, tokenizer, token_ids=ids, compat=compat)
    segments = {schema.GENERATION_ID: gid, schema.TOKEN_CHUNKS: chunks,
                schema.STOPWORD_MASK: stopword_mask(ids, tokenizer).tolist(), "segmenter": compat}
    ranges = ml.claim_char_ranges(_token_ends(tokenizer, ids), chunks)
    n_chars = len(output)
    variants = {r: ml.claim_labels(ranges, ml.hallucinated_mask(n_chars, row, rule=r, threshold=threshold))
                for r in ml.RULES}
    labels = {schema.GENERATION_ID: gid, "judge": JUDGE, schema.LABELS: variants[rule], "rule": rule,
              "labels_reference": variants["reference"], "labels_hard": variants["hard"],
              "soft_max": ml.claim_max_soft(ranges, row.get("soft_labels") or [], n_chars),
              "mushroom_id": row["id"]}
    config_record = {**config.to_record(), "source_model": row["model_id"],
                     "observer_model": observer_name or source}
    return config_record, generation, segments, labels


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from builder._llm import load_model
    from builder.errors import load_or_stop

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    out = Path(args.out)
    check_outputs([Output("--out", out / f"{name}.jsonl") for name in ("generations", "segments", f"labels.{JUDGE}",
                                                                       "configs")],
                  inputs=[("--source", source) for source in args.source or []])
    rows = [r for r in read_mushroom(args.source or [DEFAULT_SOURCE])
            if args.include_skipped_models or r["model_id"] not in MUSHROOM_SKIPPED_MODELS]
    rows = [r for r in rows if r["lang"].lower() in MUSHROOM_LANG_SEED]
    rows = list(Shard.parse(args.shard).select(rows))[: args.limit]
    stores = {name: JsonlStore(out / f"{name}.jsonl") for name in ("generations", "segments", f"labels.{JUDGE}")}
    configs = JsonlStore(out / "configs.jsonl", key=schema.GENERATION_CONFIG)
    done = {r["mushroom_id"] for r in stores[f"labels.{JUDGE}"].records()}
    # Rows dropped by the --out-of-top rule are deterministic: not retried. Other failures are.
    done |= {key for key, failure in stores[f"labels.{JUDGE}"].failures().items() if failure.get("dropped")}
    todo = [r for r in rows if r["id"] not in done]
    print(f"import-mushroom: {len(rows) - len(todo)} rows done, {len(todo)} to go")
    observer_name = None
    if args.observer:
        observer_name = args.observer_name or args.observer
    loaded: dict[str, Any] = {}
    failed = 0
    for row in tqdm(todo, desc="import-mushroom", unit="row"):
        source = args.observer or MUSHROOM_MODEL_MAP.get(row["model_id"], row["model_id"])
        if source not in loaded:
            loaded.clear()  # one model in memory at a time
            # Not about the row: a model that cannot load stops the step (every row would fail the same way).
            loaded[source] = load_or_stop(load_model, source, device=args.device, dtype=args.dtype)
        try:
            config, generation, segments, labels = process_row(
                loaded[source], row, observer_name=observer_name, rule=args.labels, threshold=args.soft_threshold,
                compat=args.compat, out_of_top=args.out_of_top)
        except _Dropped as error:
            stores[f"labels.{JUDGE}"].record_failure(row["id"], str(error), dropped=True)
            failed += 1
            continue
        except Exception as error:  # noqa: BLE001 - recorded per item, the run goes on
            stores[f"labels.{JUDGE}"].record_failure(row["id"], f"{type(error).__name__}: {error}")
            failed += 1
            continue
        configs.extend([config])
        stores["generations"].extend([generation])
        stores["segments"].extend([segments])
        stores[f"labels.{JUDGE}"].extend([labels])
    print(f"import-mushroom: {len(todo) - failed} imported, {failed} failed or dropped "
          f"(reasons in {stores[f'labels.{JUDGE}'].failures_path.name})")
    return 0
