"""The open-time pack check of a samples pack with and without the remembered shard hashes (issue #54), in one run.

    python benchmarks/bench_pack_open.py [--repeats 5]

On the embedded sample's samples pack (152 shards, 8.9 MB; its files are old, so every hash may be remembered):
``always check`` is the check as every open ran it before (nothing remembered: every shard hashed and read),
``first open`` an open after clearing what was remembered (checks and remembers), ``cached open`` the opens that
follow (the file identities and the manifest digest compared, no shard hashed or read). Each is the median of
``--repeats`` opens of :func:`much_dataset.samples.check_samples_pack` (sizes, content addresses, columns, types,
ids, duplicates). Prints one line per measurement and the ratio; writes ``benchmarks/pack_open.txt``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from much_dataset import packs
    from much_dataset.samples import SAMPLE_PACK_DIR, check_samples_pack, read_samples_manifest

    manifest = read_samples_manifest(SAMPLE_PACK_DIR)

    def check() -> None:
        check_samples_pack(SAMPLE_PACK_DIR, manifest)

    def uncached() -> None:
        packs.VERIFIED.clear()
        check()

    check()  # warm the page cache and the imports: every variant reads bytes from memory
    racy = packs.RACY_SECONDS
    times: dict[str, list[float]] = {"always": [], "first": [], "cached": []}
    for _ in range(args.repeats):  # interleaved: a load that drifts during the run weighs on all three alike
        packs.RACY_SECONDS = float("inf")  # nothing is remembered: every open checks all
        times["always"].append(timed(uncached))
        packs.RACY_SECONDS = racy
        times["first"].append(timed(uncached))
        times["cached"].append(timed(check))
    always, first, cached = (statistics.median(times[name]) for name in ("always", "first", "cached"))
    remembered = len(packs.VERIFIED)
    shards = len(manifest["shards"])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"samples pack {SAMPLE_PACK_DIR.relative_to(ROOT)}: {shards} shards, "
        f"{sum(s['bytes'] for s in manifest['shards'].values()) / 1e6:.2f} MB; {args.repeats} repeats (median); "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f}",
        f"always check (every shard hashed and read at every open, as before): {always * 1e3:.1f} ms",
        f"first open (checks, remembers {remembered} entries for {shards} shards): {first * 1e3:.1f} ms",
        f"cached open (no shard hashed or read): {cached * 1e3:.1f} ms",
        f"ratio always / cached: {always / cached:.2f}x",
    ]
    print("\n".join(lines))
    (ROOT / "benchmarks" / "pack_open.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
