"""``much monitor``: generate an answer and flag its claims while it streams (:class:`ClaimMonitor`).

The prompt is wrapped in the MUCH chat (the paper's system prompt with the brevity sentence,
docs/reference-behaviour.md#prompt) unless
``--raw``. Greedy decoding by default; ``--temperature T`` samples with top-p 0.9 / top-k 20 as MUCH, seeded.

Without ``--json`` the answer is printed as it streams, one claim at a time, flagged claims between ``[[`` and
``]]``, then a one-line summary on stderr. With ``--json`` each claim is one JSON line as soon as it is final:
``claim``, ``text``, ``token_indices`` (indices into the generated tokens, covering them once and in order),
``score`` (in [0, 1], higher = more likely hallucinated), ``flagged``, ``eos``, ``token_scores``.

Example::

    much monitor --model smollm2 --prompt "Who wrote Les Misérables?" --json
    much monitor --model smollm2 --prompt "Who wrote Les Misérables?" --calibrate sample --target-fpr 0.1
    much monitor --model smollm2 --prompt "Who wrote Les Misérables?" --method ktc   # shipped SmolLM2 statistics
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

#: The MUCH chat's system prompt (docs/reference-behaviour.md#prompt; builder/_llm.py SYSTEM_PROMPT + BRIEF_SUFFIX).
SYSTEM_PROMPT = ("You are a helpful assistant. Always answer questions directly. Your answers should be very concise "
                 "and precise.")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "monitor", help="generate an answer and flag hallucinated claims as they stream",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="smollm2 (offline), a hub id, a model folder or a .gguf file")
    parser.add_argument("--prompt", required=True, help="the question")
    parser.add_argument("--method", default="token_entropy_24",
                        help="a baseline that needs only the probabilities, or KTC (`ktc`, with --neighbours; "
                             "shipped for smollm2) (default token_entropy_24)")
    parser.add_argument("--aggregator", default="product", choices=("product", "mean", "max", "geometric"))
    parser.add_argument("--threshold", type=float, default=None,
                        help="flag claims whose score is >= this (default 0.5 unless --calibrate)")
    parser.add_argument("--calibrate", default=None, metavar="DATA",
                        help="pick the threshold on labelled data (\"sample\", a hub id or an export folder: "
                             "its test split, else all its splits)")
    parser.add_argument("--target-fpr", type=float, default=None, help="with --calibrate (default 0.10)")
    parser.add_argument("--target-precision", type=float, default=None, help="with --calibrate, instead of FPR")
    parser.add_argument("--neighbours", default=None, metavar="PATH|HUB_ID",
                        help="KTC's token-neighbour statistics of the model's tokenizer (`much neighbours`); "
                             "shipped for smollm2")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=None, help="sample at this temperature (default greedy)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true", help="one JSON object per claim per line")
    parser.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"much monitor: error: {message}", file=sys.stderr)
    return 2


def _input_ids(tokenizer, prompt: str, *, raw: bool):
    import torch

    if raw or not getattr(tokenizer, "chat_template", None):
        return torch.tensor([tokenizer.encode(prompt)])
    chat = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
    text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    return torch.tensor([tokenizer.encode(text, add_special_tokens=False)])


def _neighbours(args: argparse.Namespace) -> Any:
    """KTC's statistics: ``--neighbours``, else the shipped SmolLM2 ones for ``--model smollm2``; None when the
    method needs none (or none is known: ``online_spec`` then says what to pass)."""
    from much_metric.baselines import load_neighbours
    from much_metric.baselines.methods.ktc import SAMPLE_NEIGHBOURS
    from much_metric.baselines.registry import resolve

    if "neighbours" not in resolve(args.method).needs:
        return None
    if args.neighbours is not None:
        return load_neighbours(args.neighbours)
    if args.model == "smollm2" and SAMPLE_NEIGHBOURS.is_file():
        stats = load_neighbours(SAMPLE_NEIGHBOURS)
        print(f"KTC neighbour statistics (shipped, SmolLM2 tokenizer): {stats.describe()}", file=sys.stderr)
        return stats
    raise ValueError(f"method {args.method!r} needs the token-neighbour statistics of {args.model}'s tokenizer: pass "
                     "--neighbours PATH|HUB_ID (see `much neighbours --help`)")


def _calibration_data(source: str) -> Any:
    """The labelled rows to calibrate on: the ``test`` split of ``sample`` or of a folder/hub dataset with splits
    (the human-labelled one), else its only split, else every split together."""
    import much_dataset

    data = much_dataset.load(source, split="test" if source == "sample" else None)
    if not hasattr(data, "keys"):  # one split already
        return data
    if "test" in data:
        return data["test"]
    if len(data) == 1:
        return next(iter(data.values()))
    from datasets import concatenate_datasets

    return concatenate_datasets([data[name] for name in sorted(data)])


def run(args: argparse.Namespace) -> int:
    if args.max_new_tokens < 1:
        return _fail(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    if args.temperature is not None and not args.temperature > 0:
        return _fail(f"--temperature must be > 0, got {args.temperature}")
    if args.calibrate is None and (args.target_fpr is not None or args.target_precision is not None):
        return _fail("--target-fpr / --target-precision need --calibrate DATA")
    if args.calibrate is not None and args.threshold is not None:
        return _fail("give --threshold or --calibrate, not both")
    import math

    if args.threshold is not None and not math.isfinite(args.threshold):
        return _fail(f"--threshold must be a finite number, got {args.threshold}")
    if args.target_fpr is not None and args.target_precision is not None:
        return _fail("give --target-fpr or --target-precision, not both")
    if args.target_fpr is not None and not 0 <= args.target_fpr <= 1:
        return _fail(f"--target-fpr must be in [0, 1], got {args.target_fpr}")
    if args.target_precision is not None and not 0 < args.target_precision <= 1:
        return _fail(f"--target-precision must be in (0, 1], got {args.target_precision}")
    try:
        from much_metric.models import load_causal_lm
        from much_metric.monitor import ClaimMonitor, online_spec

        resources = {"neighbours": _neighbours(args)}
        online_spec(args.method, 24, resources)  # a bad --method fails before the model loads
        # The calibration data load before the model: a bad folder fails in seconds, not after the model.
        calibration_data = None if args.calibrate is None else _calibration_data(args.calibrate)
        try:
            model, tokenizer = load_causal_lm(args.model, device=args.device)
        except Exception as error:  # noqa: BLE001 -- missing files, offline hub, unknown id: one message
            raise ValueError(f"--model {args.model!r} could not be loaded: {type(error).__name__}: {error}") from None
        threshold = 0.5 if args.threshold is None and args.calibrate is None else args.threshold
        monitor = ClaimMonitor(tokenizer, args.method, aggregator=args.aggregator, threshold=threshold,
                               neighbours=resources["neighbours"])
        if args.calibrate is not None:
            result = monitor.calibrate(calibration_data, target_fpr=args.target_fpr,
                                       target_precision=args.target_precision)
            print(f"calibrated on {args.calibrate}: {result}", file=sys.stderr)
        input_ids = _input_ids(tokenizer, args.prompt, raw=args.raw).to(args.device)
        sampling = {"do_sample": False}
        if args.temperature is not None:
            import random

            import numpy as np
            import torch

            # the reference's reseeding before each question (docs/reference-behaviour.md#sampling)
            torch.manual_seed(args.seed)
            np.random.seed(args.seed)
            random.seed(args.seed)
            sampling = {"do_sample": True, "temperature": args.temperature, "top_p": 0.9, "top_k": 20}
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        claims = monitor.generate(model, input_ids, max_new_tokens=args.max_new_tokens, pad_token_id=pad,
                                  attention_mask=input_ids.new_ones(input_ids.shape), **sampling)
        flagged = total = 0
        for claim in claims:
            if args.json:
                record = claim.to_dict()
                record["score"] = min(max(record["score"], 0.0), 1.0)  # geometric: an all-stopword claim is -1e-5/n
                print(json.dumps(record, ensure_ascii=False), flush=True)
            else:
                text = claim.text if not claim.flagged else f"[[{claim.text}]]"
                print(text, end="", flush=True)
            total += not claim.eos
            flagged += claim.flagged
        if not args.json:
            print()
            print(f"{flagged} of {total} claims flagged ({args.method}, {args.aggregator}, threshold "
                  f"{monitor.threshold:.4g}; flagged claims in [[ ]])", file=sys.stderr)
    except (ValueError, KeyError, OSError, ImportError) as error:
        return _fail(str(error))
    return 0
