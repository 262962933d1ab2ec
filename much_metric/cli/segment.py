"""``much segment``: claim segmentation of a JSONL of generations (``generation_id``, ``output``, ``output_tokens``).

Writes one JSON line per generation: ``{"generation_id": ..., "token_chunks": [[0, 1, 2], [3], ...]}``, identical
to much-segmenter (``--compat 0.2.1`` reproduces the MUCH data, 0.3.0 the current release). ``output_tokens`` are
the ids the model generated; when a record has none, the output is tokenized with offsets instead. Given ids must
be in the tokenizer's vocabulary and decode to exactly ``output`` (same characters in the same order, not only the
same length). ``--input -`` reads the JSONL from standard input.

Example::

    much segment --input generations.jsonl --tokenizer path/to/tokenizer.json --eos-token "<|eot_id|>" \\
        --output chunks.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from much_dataset.schema import GENERATION_ID, OUTPUT, OUTPUT_TOKENS, TOKEN_CHUNKS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "segment",
        help="split generations into claims (token_chunks), exactly as much-segmenter",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--input", required=True,
                        help=f"JSONL with {GENERATION_ID}, {OUTPUT}, {OUTPUT_TOKENS} ('-' = standard input)")
    parser.add_argument(
        "--tokenizer", required=True,
        help="the generating LLM's tokenizer: 'smollm2' (the sample's, packaged), a tokenizer.json file, a tokenizer "
             "folder, a .gguf file, a Mistral tekken*.json file or a hub id (as much run --tokenizer)",
    )
    parser.add_argument("--eos-token", default=None,
                        help="EOS token to set (e.g. <|eot_id|> for a bare tokenizer.json)")
    parser.add_argument("--compat", choices=("0.3.0", "0.2.1"), default="0.3.0",
                        help="much-segmenter version to reproduce (0.2.1 built the MUCH data; default 0.3.0)")
    parser.add_argument("--output", default="-", help="output JSONL (default: stdout)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (by default: one on a terminal)")
    parser.set_defaults(func=run)


def load_tokenizer_argument(path: str, *, eos_token: str | None = None):
    """The tokenizer of ``--tokenizer`` (the toolkit's one loader: also ``smollm2`` and hub ids).

    Raises ``FileNotFoundError`` for a missing path and ``ValueError`` for a file no loader accepts (``tokenizers``
    raises a bare ``Exception`` for malformed JSON)."""
    from much_metric.models import load_tokenizer as load

    try:
        return load(path, eos_token=eos_token)
    except (OSError, ImportError):
        raise
    except Exception as error:  # noqa: BLE001 - tokenizers/transformers raise bare Exception on a malformed file
        raise ValueError(f"--tokenizer {path}: cannot load a tokenizer ({type(error).__name__}: {error})") from None


def _records(path: str):
    import contextlib

    from much_dataset.jsonl import parse_jsonl_lines

    name = "<stdin>" if path == "-" else path
    with contextlib.nullcontext(sys.stdin) if path == "-" else open(path, encoding="utf-8") as handle:
        for line_number, record in parse_jsonl_lines(handle, name):
            if not isinstance(record, dict) or not isinstance(record.get(GENERATION_ID), str):
                raise ValueError(f"{name}:{line_number}: missing string field {GENERATION_ID!r}")
            try:
                _check_fields(record)
            except ValueError as error:
                raise ValueError(f"{name}:{line_number}: {error}") from None
            yield record


def _check_fields(record: dict) -> None:
    generation_id = record[GENERATION_ID]
    output = record.get(OUTPUT)
    if not isinstance(output, str):
        raise ValueError(
            f"generation {generation_id!r}: field {OUTPUT!r} must be a string, got {type(output).__name__}"
        )
    tokens = record.get(OUTPUT_TOKENS)
    if tokens is None:
        return
    if not isinstance(tokens, list):
        raise ValueError(f"generation {generation_id!r}: field {OUTPUT_TOKENS!r} must be a list of token ids")
    _check_ids(generation_id, tokens, None)


def _check_ids(generation_id: str, tokens: list, vocabulary_size: int | None) -> None:
    """Token ids are ints (not bools) in ``[0, vocabulary_size)`` (``[0, inf)`` before the tokenizer is known)."""
    top = float("inf") if vocabulary_size is None else vocabulary_size
    for position, token in enumerate(tokens):
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < top:
            limit = "" if vocabulary_size is None else f" < {vocabulary_size} (the tokenizer's vocabulary)"
            raise ValueError(f"generation {generation_id!r}: field {OUTPUT_TOKENS!r}: token {position} is "
                             f"{token!r}; token ids are integers >= 0{limit}")


def _check_content(generation_id: str, output: str, tokens: list[int], tokenizer) -> None:
    """The ids decode to ``output`` itself: equal length is not enough (ids in another order have it too)."""
    decoded = tokenizer.decode(tokens)
    if decoded == output:
        return
    first = next((k for k, (a, b) in enumerate(zip(decoded, output, strict=False)) if a != b),
                 min(len(decoded), len(output)))
    raise ValueError(f"generation {generation_id!r}: field {OUTPUT_TOKENS!r}: the tokens decode to a different text "
                     f"than {OUTPUT!r} (first difference at character {first}: {decoded[first:first + 12]!r} vs "
                     f"{output[first:first + 12]!r}): ids out of order, or of another generation or tokenizer")


def _segment_record(record: dict, tokenizer, *, compat: str) -> dict:
    """``{generation_id, token_chunks}`` for one input record; errors name the generation and the field."""
    from much_metric.segmentation import segment

    _check_fields(record)
    generation_id, output, tokens = record[GENERATION_ID], record[OUTPUT], record.get(OUTPUT_TOKENS)
    if tokens is not None:
        try:
            size = len(tokenizer)
        except TypeError:  # a tokenizer object without a length: the decoder checks ids itself
            size = None
        _check_ids(generation_id, tokens, size)
    try:
        chunks = segment(output, tokenizer, tokens, compat=compat)
    except ValueError as error:
        field = OUTPUT_TOKENS if tokens is not None else OUTPUT
        raise ValueError(f"generation {generation_id!r}: field {field!r}: {error}") from error
    if tokens is not None:
        _check_content(generation_id, output, tokens, tokenizer)
    return {GENERATION_ID: generation_id, TOKEN_CHUNKS: chunks}


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    # The whole input is read and checked before the tokenizer loads (which can take seconds): a bad record fails fast.
    records = list(_records(args.input))
    tokenizer = load_tokenizer_argument(args.tokenizer, eos_token=args.eos_token)
    lines = [
        json.dumps(_segment_record(record, tokenizer, compat=args.compat), ensure_ascii=False)
        for record in tqdm(records, desc="segment", unit="generation", disable=True if args.no_progress else None)
    ]
    text = "".join(line + "\n" for line in lines)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    # Whole-file atomic write: a rerun after an interruption simply starts again (segmenting is fast).
    from much_metric.fileio import atomic_write_text

    target = Path(args.output)
    atomic_write_text(target, text)
    print(f"wrote {len(lines)} segmentations to {target}", file=sys.stderr)
    return 0
