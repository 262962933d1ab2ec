"""verify: check whole rows of a generations file or hub shard, and recompute their probabilities.

``python -m builder verify --out DIR --source FILE --model MODEL --rows N [--tolerance 1e-4]`` reads the first ``N``
rows (after ``--shard``) and checks each one completely:

* ``candidates``: 24 candidate ids and 24 probabilities per position; 25 only with ``--out-of-top append`` (the
  serving engines) and more only with ``extend`` (the hf engine), where the extra entries end with the sampled token
  ranked below 24 (docs/generation.md);
* ``probabilities``: finite, in [0, 1], summing to at most 1 + 1e-4; ``descending``: in decreasing order;
* ``duplicate_ids``: no candidate id twice; ``sampled_token``: the sampled token among its position's candidates;
* ``token_ids``: every output token and candidate id an id of the model's vocabulary (a row that breaks it is not
  re-forwarded);
* ``eos``: the last token is the model's EOS when the row is ``finished`` (hub rows, all finished, included), and no
  EOS before it;
* ``output``: the ``output`` text equals the tokenizer's decode of ``output_tokens`` (special tokens kept, as every
  engine writes it);
* ``chunks``: every ``token_chunks`` index inside the row (when the row has chunks);
* ``recomputed``: the candidates equal a teacher-forced pass (:func:`builder.replay.replay_row`, same options as
  ``replay``) within ``--tolerance``: same number of candidates, same ids except near-ties, every probability
  (NaN counts as a difference), the pass in ``--dtype``, by default the dtype the rows record
  (builder/generation/dtype.py).

Each failure is printed as ``generation_id=..., position P, rule R: detail`` (position ``-`` for a row-wide rule) and
written to ``verify.json``; exit code 1 when any row fails. An empty selection or a negative ``--tolerance`` is an
option error (exit 2) before the model is loaded.

A samples pack (``python -m builder samples``) is verified with the same rules, each sample a row named
``<generation_id>#<sample_index>``, with the pack's temperature, chat and engine as defaults (``replay``); a pack that
stores ``K < 24`` candidates per position is checked for ``K`` (``K + 1`` when the sampled token ranked lower) and its
values against the first ``K`` of the teacher-forced pass.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from builder import replay
from builder.errors import BuilderError
from builder.store import Shard
from much_dataset import schema
from much_dataset.decoded_text import text_difference
from much_metric.fileio import atomic_write_text

__all__ = ["add_arguments", "run", "compare_probabilities", "row_problems", "RowProblem", "RULES"]

#: What the step reads and writes (``--out``-relative), for the output rules of :mod:`builder.cli`.
READS = ("source", "model")
WRITES = ("verify.json",)

RULES = ("candidates", "probabilities", "descending", "duplicate_ids", "sampled_token", "token_ids", "eos", "output",
         "chunks", "recomputed")
_SHOWN = 20


@dataclass(frozen=True)
class RowProblem:
    """One broken rule of one row (``position`` None: the rule is about the whole row)."""

    generation_id: str | None
    position: int | None
    rule: str
    detail: str

    def __str__(self) -> str:
        where = "-" if self.position is None else self.position
        return f"generation_id={self.generation_id!r}, position {where}, rule {self.rule}: {self.detail}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    replay.add_arguments(parser)
    parser.add_argument("--rows", type=int, default=20, help="how many rows to check")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest accepted |difference| (>= 0)")


def compare_probabilities(stored_ids: Sequence[Sequence[int]], stored_probs: Sequence[Sequence[float]],
            ids: Sequence[Sequence[int]], probs: Sequence[Sequence[float]], *, tolerance: float) -> dict[str, Any]:
    """``max_abs_diff`` (NaN counts as infinite), ``positions``, ``id_mismatches`` (positions whose candidate count
    differs, or whose ids differ where the probabilities are not within ``tolerance``: a real difference, not a
    near-tie) and ``first_bad`` (the first such position, or None)."""
    import numpy as np

    if len(stored_ids) != len(ids):
        raise ValueError(f"{len(stored_ids)} stored positions but {len(ids)} recomputed")
    worst, mismatches, first_bad = 0.0, 0, None
    for position, (s_ids, s_probs, r_ids, r_probs) in enumerate(zip(stored_ids, stored_probs, ids, probs,
                                                                    strict=True)):
        n = min(len(s_probs), len(r_probs))
        diff = np.abs(np.asarray(s_probs[:n], dtype=float) - np.asarray(r_probs[:n], dtype=float))
        diff = np.where(np.isnan(diff), np.inf, diff)
        here = float(diff.max()) if n else 0.0
        worst = max(worst, here)
        recomputed = dict(zip(r_ids, r_probs, strict=True))
        differs = len(s_ids) != len(r_ids) or len(s_probs) != len(s_ids)
        differs = differs or any(a != b and not abs(recomputed.get(a, -1.0) - p) <= tolerance
                                 for a, b, p in zip(s_ids[:n], r_ids[:n], s_probs[:n], strict=False))
        mismatches += differs
        if first_bad is None and (differs or not here <= tolerance):
            first_bad = position
    return {"max_abs_diff": worst, "positions": len(ids), "id_mismatches": mismatches, "first_bad": first_bad}


def _candidate_problems(gid: str | None, tokens: Sequence[int],
                        candidates: Sequence[tuple[Sequence[int], Sequence[float]]], out_of_top: str,
                        top: int) -> list[RowProblem]:
    """The first broken candidate rule, at its position (``candidates``: (ids, probabilities) per token)."""
    for position, (token, (ids, values)) in enumerate(zip(tokens, candidates, strict=True)):
        def problem(rule: str, detail: str, position: int = position) -> list[RowProblem]:
            return [RowProblem(gid, position, rule, detail)]

        if len(ids) != len(values):
            return problem("candidates", f"{len(ids)} ids but {len(values)} probabilities")
        extra_allowed = {"append": len(ids) == top + 1, "extend": len(ids) > top}.get(out_of_top, False)
        if len(ids) != top and not (extra_allowed and ids[-1] == token and token not in ids[:top]):
            return problem("candidates", f"{len(ids)} candidates; {top} expected ({top + 1} with --out-of-top append"
                                         ", more with extend, only when the last is a sampled token ranked lower)")
        if not all(isinstance(p, int | float) and math.isfinite(p) and 0 <= p <= 1 for p in values):
            return problem("probabilities", "a probability is NaN, infinite or outside [0, 1]")
        if sum(values[:top]) > 1 + 1e-4:
            return problem("probabilities", f"the top {top} sum to {sum(values[:top]):.6g} > 1")
        if any(b > a for a, b in zip(values, values[1:], strict=False)):
            return problem("descending", "probabilities not in decreasing order")
        if len(set(ids)) != len(ids):
            return problem("duplicate_ids", "a candidate id appears twice")
        if token not in ids:
            return problem("sampled_token", f"sampled token {token} is not among the candidates")
    return []


def row_problems(row: dict[str, Any], *, eos_ids: set[int], decode: Callable[[list[int]], str],
                 out_of_top: str = "extend", top: int = schema.TOP_K) -> list[RowProblem]:
    """Every broken structural rule of ``row`` (module docstring), the first one per rule family (``top``: the
    candidates stored per position, fewer than 24 only in a samples pack that says so)."""
    gid = row.get(schema.GENERATION_ID)
    tokens = [int(t) for t in row.get(schema.OUTPUT_TOKENS) or []]
    ids_rows, value_rows = row.get(schema.LOGITS_TOKEN_IDS) or [], row.get(schema.LOGITS_VALUES) or []
    if not tokens:
        return [RowProblem(gid, None, "candidates", "no output tokens")]
    if not len(tokens) == len(ids_rows) == len(value_rows):
        return [RowProblem(gid, None, "candidates", f"{len(tokens)} tokens, {len(ids_rows)} candidate id rows, "
                                                    f"{len(value_rows)} probability rows")]
    problems = _candidate_problems(gid, tokens, list(zip(ids_rows, value_rows, strict=True)),
                                   "append" if top < schema.TOP_K else out_of_top, top)
    early = [p for p, t in enumerate(tokens[:-1]) if t in eos_ids]
    if early:
        problems.append(RowProblem(gid, early[0], "eos", "EOS before the last token"))
    if row.get("finished", True) and tokens[-1] not in eos_ids:
        problems.append(RowProblem(gid, len(tokens) - 1, "eos", f"the row is finished but its last token "
                                   f"{tokens[-1]} is not EOS {sorted(eos_ids)}"))
    difference = text_difference(row.get(schema.OUTPUT), decode(tokens))  # the rule the samples reader applies
    if difference is not None:
        problems.append(RowProblem(gid, None, "output", f"output {difference}"))
    chunks = row.get(schema.TOKEN_CHUNKS)
    if chunks is not None:
        flat = [i for chunk in chunks for i in chunk]
        if flat != list(range(len(tokens))) or any(not chunk for chunk in chunks):
            bad = next((i for i in flat if not 0 <= i < len(tokens)), None)
            detail = (f"chunk index {bad} outside the row's {len(tokens)} tokens" if bad is not None
                      else "chunks are not the row's tokens 0..n-1, each once, in order, none empty")
            problems.append(RowProblem(gid, None, "chunks", detail))
    return problems


def _outside_vocabulary(row: dict[str, Any], vocab: int | None) -> tuple[int, str] | None:
    """(position, detail) of the first output token or candidate id that is not an id of a ``vocab``-sized
    vocabulary (or not an integer), else None."""
    if vocab is None:
        return None
    tokens = row.get(schema.OUTPUT_TOKENS) or []
    candidates = row.get(schema.LOGITS_TOKEN_IDS) or [[] for _ in tokens]
    for position, (token, ids) in enumerate(zip(tokens, candidates, strict=False)):
        for what, value in (("output token", token), *(("candidate id", i) for i in ids)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
                return position, f"{what} {value!r} is not an id of the model's vocabulary [0, {vocab})"
    return None


def _options(args: argparse.Namespace) -> None:
    from builder._llm import check_device_and_dtype

    check_device_and_dtype(args.device, args.dtype)
    if args.rows < 1:
        raise BuilderError(f"--rows must be >= 1, got {args.rows}")
    if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise BuilderError(f"--tolerance must be a finite number >= 0, got {args.tolerance}")
    if args.temperature <= 0:
        raise BuilderError(f"--temperature must be > 0, got {args.temperature}")


def _recorded_or_used(rows: list[dict[str, Any]], source: str | Path, used: str | None) -> str | None:
    """The one dtype the rows record (None: none), or ``used`` when they record several (``--dtype`` chose it)."""
    from builder.generation.dtype import recorded_dtype

    try:
        return recorded_dtype(rows, source)
    except BuilderError:
        return used


def run(args: argparse.Namespace) -> int:
    from builder._llm import eos_token_ids, load_model
    from builder.samples_store import trim_candidates

    replay.resolve_defaults(args)
    _options(args)
    rows = list(Shard.parse(args.shard).select(list(replay.read_rows(args.source))))[: args.rows]
    if not rows:
        raise BuilderError(f"{args.source}: no rows to verify (an empty file, or --shard {args.shard} selects none)")
    from builder.generation.dtype import dtype_hint, replay_dtype

    llm = load_model(args.model, device=args.device, dtype=replay_dtype(args.dtype, rows, args.source))
    recorded = _recorded_or_used(rows, args.source, args.dtype)
    dtype = str(llm.dtype).removeprefix("torch.")
    eos = set(eos_token_ids(llm.model, llm.tokenizer))

    def decode(tokens: list[int]) -> str:
        return llm.tokenizer.decode(tokens, skip_special_tokens=False)

    total: dict[str, Any] = {"rows": 0, "positions": 0, "id_mismatches": 0, "max_abs_diff": 0.0}
    problems: list[RowProblem] = []
    vocab = getattr(llm.model.config, "vocab_size", None)
    for row in rows:
        gid = row.get(schema.GENERATION_ID)
        outside = _outside_vocabulary(row, vocab)
        if outside is not None:
            problems.append(RowProblem(gid, outside[0], "token_ids", outside[1]))
            total["rows"] += 1
            continue
        found = row_problems(row, eos_ids=eos, decode=decode, out_of_top=args.out_of_top,
                             top=args.stored_candidates)
        total["rows"] += 1
        if not any(p.rule == "candidates" and p.position is None for p in found):
            ids, probs = replay.replay_row(llm, row, temperature=args.temperature, prompt_style=args.prompt_style,
                                           brief=not args.no_brief, out_of_top=args.out_of_top)
            if args.stored_candidates < schema.TOP_K:  # the pack kept fewer: compare what it kept
                trimmed = trim_candidates({schema.OUTPUT_TOKENS: row[schema.OUTPUT_TOKENS],
                                           schema.LOGITS_TOKEN_IDS: ids, schema.LOGITS_VALUES: probs},
                                          args.stored_candidates)
                ids, probs = trimmed[schema.LOGITS_TOKEN_IDS], trimmed[schema.LOGITS_VALUES]
            numbers = compare_probabilities(row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES], ids, probs,
                                            tolerance=args.tolerance)
            total["positions"] += numbers["positions"]
            total["id_mismatches"] += numbers["id_mismatches"]
            total["max_abs_diff"] = max(total["max_abs_diff"], numbers["max_abs_diff"])
            if numbers["first_bad"] is not None:
                found.append(RowProblem(gid, numbers["first_bad"], "recomputed",
                                        f"differs from a teacher-forced pass of --model (largest |difference| "
                                        f"{numbers['max_abs_diff']:.3g}, tolerance {args.tolerance:g})"))
        problems += found
    for problem in problems[:_SHOWN]:
        print(f"verify: {problem}")
    if len(problems) > _SHOWN:
        print(f"verify: ... {len(problems) - _SHOWN} more in verify.json")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    report = {**total, "max_abs_diff": total["max_abs_diff"] if math.isfinite(total["max_abs_diff"]) else "inf",
              "failed_rows": len({p.generation_id for p in problems}), "problems": [asdict(p) for p in problems],
              "source": str(args.source), "model": args.model, "dtype": dtype,
              "dtype_hint": dtype_hint(recorded, dtype, total["max_abs_diff"]) if problems else ""}
    atomic_write_text(Path(args.out) / "verify.json", json.dumps(report, indent=1))
    print(f"verify: {total['rows']} rows, {total['positions']} positions ({dtype}), largest |difference| "
          f"{total['max_abs_diff']:.3g}, {total['id_mismatches']} id mismatches, {report['failed_rows']} rows "
          f"failing a rule: {f'DIFFERENT (first: {problems[0]})' if problems else 'OK'}"
          f"{'; likely the dtype: ' + report['dtype_hint'] if report['dtype_hint'] else ''}")
    return 1 if problems else 0
