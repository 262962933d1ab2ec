"""Recording failures in a samples manifest at MUCH scale: the merge before and after issue #53, in one run.

    python benchmarks/bench_samples_manifest.py [--answers 4873] [--n 10] [--failures 0.1]

A manifest listing ``answers x n`` drawn samples (MUCH at ``--n 10``: 4,873 x 10 = 48,730 pairs, 8 answers per shard
as ``--rows-per-shard 8`` writes them) receives one commit recording a failure for ``--failures`` of those pairs
(10 %: 4,873 failures). ``old`` is the merge ``builder/samples_store.py`` ran before (the set of stored pairs rebuilt
for every failure: quadratic), ``new`` is :func:`builder.samples_store.merge_commit` (linear). Both start from the same
manifest and must leave the same one (checked). Then the whole commit of the new writer (lock, read, merge, write)
is timed on a pack folder: the time the pack's lock is held. Prints one line per measurement and the ratio; writes
``benchmarks/samples_manifest.txt``.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def manifest_of(answers: int, n: int, per_shard: int = 8) -> dict:
    """A manifest listing every (answer, index) pair, ``per_shard`` answers per shard."""
    rows: dict = {}
    shards: dict = {}
    for a in range(answers):
        shard = f"{a // per_shard:064x}.parquet"
        rows[f"gid-{a:06d}"] = {shard: list(range(n))}
        shards[shard] = {"bytes": 1, "sha256": shard.split(".")[0], "n_samples": per_shard * n}
    return {"format": "much-samples/1", "rows": rows, "shards": shards, "failures": {}}


def old_merge(manifest: dict, failures: dict[str, str]) -> None:
    """The merge of a commit without a shard, as builder/samples_store.py ran it before issue #53."""
    from builder.samples_store import done_pairs

    done = done_pairs(manifest)
    manifest["failures"].update({key: reason for key, reason in failures.items()
                                 if tuple(key.rsplit("#", 1)) not in {(g, str(i)) for g, i in done}})
    manifest["n_rows"] = len(manifest["rows"])
    manifest["n_samples"] = len(done)


def main(argv: list[str] | None = None) -> int:
    from builder.samples_store import PackWriter, failure_key, merge_commit

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=4873)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--failures", type=float, default=0.1)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "samples_manifest.txt"))
    args = parser.parse_args(argv)

    base = manifest_of(args.answers, args.n)
    pairs = args.answers * args.n
    failed = {(f"gid-{a:06d}", args.n + i): "RuntimeError: engine" for a in range(args.answers)
              for i in range(args.n)}  # indices beyond n: not stored, so every failure is recorded
    failed = dict(list(failed.items())[: round(args.failures * pairs)])
    lines = [f"python {platform.python_version()}, {platform.machine()}; {args.answers} answers x {args.n} = "
             f"{pairs:,} stored pairs, {len(failed):,} failures recorded in one commit"]

    new_manifest = copy.deepcopy(base)
    started = time.perf_counter()
    merge_commit(new_manifest, None, [], failed)
    new_s = time.perf_counter() - started
    lines.append(f"new merge (merge_commit, linear): {new_s:.3f} s")
    print(lines[-1], flush=True)

    old_manifest = copy.deepcopy(base)
    started = time.perf_counter()
    old_merge(old_manifest, {failure_key(pair): reason for pair, reason in failed.items()})
    old_s = time.perf_counter() - started
    lines.append(f"old merge (a set of stored pairs per failure): {old_s:.1f} s")
    print(lines[-1], flush=True)
    assert old_manifest == new_manifest, "the two merges leave different manifests"
    lines.append(f"same manifest after both; old / new = {old_s / new_s:,.0f}x")
    print(lines[-1], flush=True)

    with tempfile.TemporaryDirectory() as folder:
        pack = Path(folder)
        (pack / "manifest.json").write_text(json.dumps(base, indent=1, sort_keys=True) + "\n")
        writer = PackWriter(pack, {"format": "much-samples/1"}, flush_every=1, n=args.n, source="bench")
        for pair, reason in failed.items():
            writer.record_failure(pair, reason)
        started = time.perf_counter()
        writer.close()  # lock, read, merge, write: everything the lock is held for
        locked_s = time.perf_counter() - started
        assert len(json.loads((pack / "manifest.json").read_text())["failures"]) == len(failed)
    lines.append(f"new commit under the pack's lock (read {pairs:,} pairs' manifest, merge, write it): "
                 f"{locked_s:.2f} s")
    print(lines[-1], flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
