"""verify: recompute N rows of a generations file or hub shard and report the largest probability difference.

``python -m builder verify --out DIR --source FILE --model MODEL --rows N [--tolerance 1e-4]`` replays the first
``N`` rows (after ``--shard``) with :func:`builder.replay.replay_row` (same options as ``replay``) and prints the
largest ``|stored - recomputed|`` over every stored probability and the number of positions whose candidate ids
differ. Exit code 1 when the difference exceeds ``--tolerance`` or ids differ beyond near-ties (two neighbouring
candidates closer than the tolerance). Writes ``verify.json`` with the numbers.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from builder import replay
from builder.errors import BuilderError
from builder.store import Shard
from much_dataset import schema

__all__ = ["add_arguments", "run", "compare"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    replay.add_arguments(parser)
    parser.add_argument("--rows", type=int, default=20, help="how many rows to recompute")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest accepted |difference|")


def compare(stored_ids: Sequence[Sequence[int]], stored_probs: Sequence[Sequence[float]],
            ids: Sequence[Sequence[int]], probs: Sequence[Sequence[float]], *, tolerance: float) -> dict[str, float]:
    """``max_abs_diff`` (over each position's common length), ``positions``, ``id_mismatches`` (ids differing where
    the stored probabilities are not within ``tolerance`` of each other: a real difference, not a near-tie)."""
    import numpy as np

    if len(stored_ids) != len(ids):
        raise ValueError(f"{len(stored_ids)} stored positions but {len(ids)} recomputed")
    worst, mismatches = 0.0, 0
    for s_ids, s_probs, r_ids, r_probs in zip(stored_ids, stored_probs, ids, probs, strict=True):
        n = min(len(s_probs), len(r_probs))
        diff = np.abs(np.asarray(s_probs[:n], dtype=float) - np.asarray(r_probs[:n], dtype=float))
        worst = max(worst, float(diff.max()) if n else 0.0)
        recomputed = dict(zip(r_ids, r_probs, strict=True))
        for a, b, p in zip(s_ids[:n], r_ids[:n], s_probs[:n], strict=True):
            if a != b and abs(recomputed.get(a, -1.0) - p) > tolerance:
                mismatches += 1
                break
    return {"max_abs_diff": worst, "positions": len(ids), "id_mismatches": mismatches}


def run(args: argparse.Namespace) -> int:
    from builder._llm import load_model

    if args.rows < 1:
        raise BuilderError(f"--rows must be >= 1, got {args.rows}")
    rows = list(Shard.parse(args.shard).select(list(replay.read_rows(args.source))))[: args.rows]
    llm = load_model(args.model, device=args.device, dtype=args.dtype)
    total = {"rows": 0, "positions": 0, "id_mismatches": 0, "max_abs_diff": 0.0}
    for row in rows:
        ids, probs = replay.replay_row(llm, row, temperature=args.temperature, prompt_style=args.prompt_style,
                                       brief=not args.no_brief, out_of_top=args.out_of_top)
        try:
            found = compare(row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES], ids, probs,
                            tolerance=args.tolerance)
        except ValueError as error:
            raise BuilderError(f"{args.source}: generation_id={row[schema.GENERATION_ID]!r}: {error}") from None
        total["rows"] += 1
        total["positions"] += found["positions"]
        total["id_mismatches"] += found["id_mismatches"]
        total["max_abs_diff"] = max(total["max_abs_diff"], found["max_abs_diff"])
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "verify.json").write_text(json.dumps({**total, "source": str(args.source),
                                                            "model": args.model}, indent=1))
    ok = total["max_abs_diff"] <= args.tolerance and total["id_mismatches"] == 0
    print(f"verify: {total['rows']} rows, {total['positions']} positions, largest |difference| "
          f"{total['max_abs_diff']:.3g}, {total['id_mismatches']} id mismatches: {'OK' if ok else 'DIFFERENT'}")
    return 0 if ok else 1
