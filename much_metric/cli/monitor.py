"""``much monitor``: generate an answer and flag its claims while it streams (:class:`ClaimMonitor`).

The prompt is wrapped in the MUCH chat (the paper's system prompt with the brevity sentence,
docs/reference-behaviour.md#prompt) unless
``--raw``. Greedy decoding by default; ``--temperature T`` samples with top-p 0.9 / top-k 20 as MUCH, seeded.

Without ``--json`` the answer is printed as it streams, one claim at a time, flagged claims between ``[[`` and
``]]``, then a one-line summary on stderr. With ``--json`` each claim is one JSON line as soon as it is final:
``claim``, ``text``, ``token_indices`` (indices into the generated tokens, covering them once and in order),
``score`` (in [0, 1], higher = more likely hallucinated), ``flagged``, ``eos``, ``token_scores``.

With ``--base-url`` the answer streams from an OpenAI-compatible server instead (``vllm serve``, SGLang, OpenAI):
``--model`` is the served model name, ``--tokenizer`` the served model's tokenizer (default ``--model``), and the
candidates are the most probable of the server's ``--top-logprobs`` alternatives, at most 24 (default 20, the
OpenAI API's cap: ``token_entropy_24`` needs 24; ask ``vllm serve MODEL --max-logprobs 25 --logprobs-mode
processed_logprobs`` for 25, since vLLM cuts its list after putting the sampled token first; its log-probabilities
are then temperature-scaled as MUCH's). Token ids are requested with ``return_tokens_as_token_ids`` (vLLM, SGLang;
``--no-token-ids`` for servers that refuse it). Sampling sends ``top_p`` 1 (vLLM's processed log-probabilities are
taken after top-p truncation); greedy sends temperature 0. See :mod:`much_metric.monitor._openai`.

Example::

    much monitor --model smollm2 --prompt "Who wrote Les Misérables?" --json
    much monitor --base-url http://127.0.0.1:8000/v1 --model smollm2-135m --tokenizer smollm2 --top-logprobs 25 \
        --prompt "Who wrote Les Misérables?"
    much monitor --model smollm2 --prompt "Who wrote Les Misérables?" --calibrate sample --target-fpr 0.1
    much monitor --model smollm2 --prompt "Who wrote Les Misérables?" --method ktc   # shipped SmolLM2 statistics
    much monitor --model smollm2 --prompt "Who wrote Les Misérables?" --conformal thresholds.json --group en --drop

``--conformal FILE`` (``much calibrate --conformal``) flags the claims the conformal filter does not keep, with the
file's guarantee (docs/conformal.md): an answer-level file flags live, at its group's threshold; a claim-level file
(conformal selection over the answer's claims) flags once the answer is complete. ``--drop`` leaves flagged claims
out of the output.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from much_dataset.schema import chat_messages


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
    parser.add_argument("--conformal", default=None, metavar="FILE",
                        help="flag the claims a conformal threshold file (`much calibrate --conformal`) does not keep")
    parser.add_argument("--group", default=None,
                        help="with --conformal: the answer's value of the file's --by column (e.g. its language)")
    parser.add_argument("--drop", action="store_true", help="with --conformal: leave flagged claims out")
    parser.add_argument("--neighbours", default=None, metavar="PATH|HUB_ID",
                        help="KTC's token-neighbour statistics of the model's tokenizer (`much neighbours`); "
                             "shipped for smollm2")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=None, help="sample at this temperature (default greedy)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--base-url", default=None,
                        help="stream from this OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1) instead of "
                             "loading --model (then the served model name)")
    parser.add_argument("--tokenizer", default=None,
                        help="with --base-url: the served model's tokenizer (hub id, folder, .gguf, tokenizer.json "
                             "or smollm2; default --model)")
    parser.add_argument("--top-logprobs", type=int, default=20,
                        help="with --base-url: alternatives requested per token, the monitor keeps at most 24 "
                             "(default 20, the OpenAI API's cap; 25 for token_entropy_24 on vllm serve "
                             "--max-logprobs 25)")
    parser.add_argument("--no-token-ids", action="store_true",
                        help="with --base-url: do not request return_tokens_as_token_ids (servers that refuse it); "
                             "ids are then read from the token bytes")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="with --base-url: environment variable holding the API key (default OPENAI_API_KEY)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="with --base-url: seconds for the whole answer (default 300)")
    parser.add_argument("--json", action="store_true", help="one JSON object per claim per line")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress lines and no model-loading bars on stderr (by default: on a terminal)")
    parser.set_defaults(func=run)


def _show_progress(args: argparse.Namespace) -> bool:
    """Progress lines go to a terminal only, unless --no-progress: a pipe or a log keeps the one-line error contract
    of ``much``."""
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


def _progress(args: argparse.Namespace, message: str) -> None:
    """One line on stderr before a step that takes seconds (model, tokenizer, data), so the first wait is explained;
    stdout keeps only the claims (or the JSON records)."""
    if _show_progress(args):
        print(f"much monitor: {message} ...", file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    print(f"much monitor: error: {message}", file=sys.stderr)
    return 2


def _input_ids(tokenizer, prompt: str, *, raw: bool):
    import torch

    if raw or not getattr(tokenizer, "chat_template", None):
        return torch.tensor([tokenizer.encode(prompt)])
    text = tokenizer.apply_chat_template(chat_messages(prompt), tokenize=False, add_generation_prompt=True)
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


def _load_model(args: argparse.Namespace):
    from much_metric.models import load_causal_lm

    try:
        return load_causal_lm(args.model, device=args.device)
    except Exception as error:  # noqa: BLE001 -- missing files, offline hub, unknown id: one message
        raise ValueError(f"--model {args.model!r} could not be loaded: {type(error).__name__}: {error}") from None


def _load_tokenizer(source: str):
    from much_metric.models import load_tokenizer

    try:
        return load_tokenizer(source)
    except Exception as error:  # noqa: BLE001 -- same as a model that cannot load
        raise ValueError(f"tokenizer {source!r} could not be loaded ({type(error).__name__}: {error}): pass "
                         "--tokenizer, the served model's tokenizer") from None


def _local_claims(args: argparse.Namespace, monitor, model, tokenizer):
    input_ids = _input_ids(tokenizer, args.prompt, raw=args.raw).to(args.device)
    sampling: dict[str, Any] = {"do_sample": False}
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
    return monitor.generate(model, input_ids, max_new_tokens=args.max_new_tokens, pad_token_id=pad,
                            attention_mask=input_ids.new_ones(input_ids.shape), **sampling)


def _served_claims(args: argparse.Namespace, monitor):
    """Claims of one answer streamed from ``--base-url`` (the MUCH chat unless ``--raw``)."""
    import os

    from much_metric.monitor import stream_chat_completion

    messages = [{"role": "user", "content": args.prompt}] if args.raw else chat_messages(args.prompt)
    options: dict[str, Any] = {"max_tokens": args.max_new_tokens, "seed": args.seed}
    if args.temperature is None:
        options["temperature"] = 0.0
    else:
        options.update(temperature=args.temperature, top_p=1.0)
    if not args.no_token_ids:
        options["return_tokens_as_token_ids"] = True
    chunks = stream_chat_completion(args.base_url, args.model, messages, api_key=os.environ.get(args.api_key_env),
                                    top_logprobs=args.top_logprobs, timeout=args.timeout, **options)
    return monitor.stream_openai(chunks)


def _conformal(args: argparse.Namespace) -> Any:
    """The threshold file of ``--conformal``, checked against the monitor's method, aggregation and ``--group``."""
    from much_metric.conformal import load_calibration

    if args.threshold is not None or args.calibrate is not None:
        raise ValueError("give --conformal FILE, --threshold or --calibrate, not two of them")
    calibration = load_calibration(args.conformal)
    aggregation = calibration.aggregation
    if calibration.signal != args.method or aggregation.get("aggregator", args.aggregator) != args.aggregator \
            or aggregation.get("stopword_handling", "null") != "null" or aggregation.get("level") == "claim":
        raise ValueError(f"--conformal {args.conformal} was calibrated for signal {calibration.signal!r} "
                         f"({aggregation}); the monitor scores {args.method!r} with the {args.aggregator} aggregator "
                         f"and the null stopword rule: pass --method/--aggregator to match, or calibrate for them")
    calibration.group(args.group)  # a group outside the calibration fails before the model loads
    return calibration


def _conformal_flags(claims: Any, calibration: Any, group: str | None) -> Any:
    """A claim-level file: select among the complete answer's claims (BH over them), then hand the claims out."""
    from dataclasses import replace

    from much_metric.conformal import filter_claims

    claims = list(claims)
    scored = [claim for claim in claims if not claim.eos]
    kept = iter(filter_claims(calibration, [claim.score for claim in scored], group=group, drop=False))
    return [claim if claim.eos else replace(claim, flagged=not next(kept)) for claim in claims]


def run(args: argparse.Namespace) -> int:
    if (args.group is not None or args.drop) and args.conformal is None:
        return _fail("--group / --drop go with --conformal FILE")
    if args.max_new_tokens < 1:
        return _fail(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    if args.temperature is not None and not args.temperature > 0:
        return _fail(f"--temperature must be > 0, got {args.temperature}")
    if args.calibrate is None and (args.target_fpr is not None or args.target_precision is not None):
        return _fail("--target-fpr / --target-precision need --calibrate DATA")
    if args.calibrate is not None and args.threshold is not None:
        return _fail("give --threshold or --calibrate, not both")
    if args.threshold is not None and not math.isfinite(args.threshold):
        return _fail(f"--threshold must be a finite number, got {args.threshold}")
    if args.target_fpr is not None and args.target_precision is not None:
        return _fail("give --target-fpr or --target-precision, not both")
    if args.target_fpr is not None and not 0 <= args.target_fpr <= 1:
        return _fail(f"--target-fpr must be in [0, 1], got {args.target_fpr}")
    if args.target_precision is not None and not 0 < args.target_precision <= 1:
        return _fail(f"--target-precision must be in (0, 1], got {args.target_precision}")
    if args.base_url is None and (args.tokenizer is not None or args.no_token_ids or args.top_logprobs != 20):
        return _fail("--tokenizer / --top-logprobs / --no-token-ids go with --base-url")
    if args.top_logprobs < 1:
        return _fail(f"--top-logprobs must be >= 1, got {args.top_logprobs}")
    if not 0 < args.timeout < math.inf:
        return _fail(f"--timeout must be a positive number of seconds, got {args.timeout}")
    try:
        _progress(args, f"loading the {args.method} method")
        from much_metric.monitor import ClaimMonitor, online_spec

        width = 24 if args.base_url is None else min(args.top_logprobs, 24)
        resources = {"neighbours": _neighbours(args)}
        try:
            online_spec(args.method, width, resources)  # a bad --method fails before the model loads
        except ValueError as error:
            if args.base_url is None or width >= 24:
                raise
            raise ValueError(f"{error} (--top-logprobs {width}: a server allowing 25, e.g. vllm serve "
                             "--max-logprobs 25, and --top-logprobs 25)") from None
        # The calibration data load before the model: a bad folder fails in seconds, not after the model.
        if args.calibrate is not None:
            _progress(args, f"loading the calibration data {args.calibrate}")
        calibration_data = None if args.calibrate is None else _calibration_data(args.calibrate)
        conformal = None if args.conformal is None else _conformal(args)
        if args.base_url is None:
            _progress(args, f"loading the model {args.model} on {args.device}")
            model, tokenizer = _load_model(args)
        else:
            _progress(args, f"loading the tokenizer of {args.tokenizer or args.model}")
            tokenizer = _load_tokenizer(args.tokenizer or args.model)
        threshold = 0.5 if args.threshold is None and args.calibrate is None else args.threshold
        if conformal is not None:
            threshold = conformal.flag_threshold(args.group) if conformal.guarantee == "answer" else None
        monitor = ClaimMonitor(tokenizer, args.method, aggregation=args.aggregator, threshold=threshold,
                               top_k=width, neighbours=resources["neighbours"])
        if args.calibrate is not None:
            _progress(args, "calibrating the threshold")
            result = monitor.calibrate(calibration_data, target_fpr=args.target_fpr,
                                       target_precision=args.target_precision)
            print(f"calibrated on {args.calibrate}: {result}", file=sys.stderr)
        _progress(args, "generating" if args.base_url is None else f"streaming from {args.base_url}")
        claims = _served_claims(args, monitor) if args.base_url else _local_claims(args, monitor, model, tokenizer)
        if conformal is not None and conformal.guarantee == "claim":
            claims = _conformal_flags(claims, conformal, args.group)
        flagged = total = 0
        for claim in claims:
            total += not claim.eos
            flagged += claim.flagged
            if args.drop and claim.flagged:
                continue
            if args.json:
                record = claim.to_dict()
                record["score"] = min(max(record["score"], 0.0), 1.0)  # geometric: an all-stopword claim is -1e-5/n
                print(json.dumps(record, ensure_ascii=False), flush=True)
            else:
                text = claim.text if not claim.flagged else f"[[{claim.text}]]"
                print(text, end="", flush=True)
        if not args.json:
            print()
            rule = (f"threshold {monitor.threshold:.4g}" if conformal is None else
                    f"{conformal.guarantee}-level conformal filter, alpha {conformal.alpha:g}"
                    f"{f', {conformal.by}={args.group}' if conformal.by else ''}")
            print(f"{flagged} of {total} claims flagged ({args.method}, {args.aggregator}, {rule}; flagged claims "
                  f"{'dropped' if args.drop else 'in [[ ]]'})", file=sys.stderr)
    except (ValueError, KeyError, OSError, ImportError) as error:
        return _fail(str(error))
    return 0
