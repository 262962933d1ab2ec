"""A random internals pack for every English sample row, written with the builder's own shard and manifest writers
(what the tests of the methods that read a pack run ``much run --internals`` on)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

LAYERS, HEADS, WIDTH = 6, 3, 4


class _Config:
    num_hidden_layers, num_attention_heads, hidden_size = LAYERS, HEADS, WIDTH


def write_random_pack(folder: Path, data, *, attention_to_self: bool = False) -> None:
    """Seeded random ``attention_to_previous`` (and, with ``attention_to_self``, a diagonal: a fraction in
    [0.01, 1) of what the previous position leaves, so that one softmax row sums to at most 1) and zero hidden states
    for every row of ``data`` (``generation_id``, ``output_tokens``)."""
    from builder.internals import InternalsOptions
    from builder.internals_store import commit_rows, pack_identity, write_shard

    rng = np.random.default_rng(0)
    options = InternalsOptions(hidden_layers=(1,), attention_to_self=attention_to_self)
    identity = pack_identity("random", "0" * 64, _Config, options, "f" * 64)
    arrays, entries = {}, {}
    for gid, tokens in zip(data["generation_id"], data["output_tokens"], strict=True):
        n = len(tokens)
        previous = rng.random((n, LAYERS, HEADS), dtype=np.float32)
        arrays[f"{gid}/attention_to_previous"] = previous
        if attention_to_self:
            arrays[f"{gid}/attention_to_self"] = (rng.uniform(0.01, 1, (n, LAYERS, HEADS))
                                                  * (1 - previous)).astype(np.float32)
        arrays[f"{gid}/hidden"] = np.zeros((n, 1, WIDTH), dtype=np.float16)
        entries[gid] = {"n_tokens": n, "max_abs_diff": 0.0}
    shard, size = write_shard(folder, arrays)
    commit_rows(folder, identity, (shard, size), {g: {**e, "shard": shard} for g, e in entries.items()}, {})
