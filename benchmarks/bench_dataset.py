"""Benchmark: load a full-size MUCH-shaped dataset and turn every row into numpy arrays.

Synthetic data (``much_dataset.synthetic``, NOT MUCH data) at MUCH's size: 4,873 rows, ~21 tokens per row, 24
probabilities per token. Two ways are timed in the same run:

* ours -- the published folder (:mod:`much_dataset.card`: typed ``Array2D`` parquet shards + card) read with
  ``much_dataset.load`` (which also validates every row), then :func:`much_dataset.loader.to_numpy` (per-row views
  into the flat Arrow buffers; int32 ids, float32 probabilities);
* ours with the ``datasets`` numpy formatter instead -- same load, then ``ds.with_format("numpy", dtype=None)[:]``;
* the obvious alternative -- the hub's plain list-of-lists parquet read with ``datasets.load_dataset`` (no
  validation), then per-row Python conversion ``np.asarray(row[column])`` for every row.

It also times building from the export's ``rows/`` JSONL with :class:`much_dataset.builder.MuchBuilder` (validated,
typed) against ``datasets.load_dataset("json", ...)`` on the same file (untyped, unvalidated).

"cold" = first load (``datasets`` converts parquet into its Arrow cache); "warm" = the cache already exists (the
usual case after the first call). Target: ours, warm, load + numpy pass < 1 s. Prints the times and the ratios.

    python benchmarks/bench_dataset.py [--rows 4873] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

ARRAY_COLUMNS = ("output_tokens", "logits_token_ids", "logits_values", "token_chunks", "labels", "stopword_mask")


def _ours(folder: Path, cache: Path, *, formatter: bool = False) -> tuple[float, float, int]:
    import much_dataset
    from much_dataset.loader import to_numpy

    start = time.perf_counter()
    ds = much_dataset.load(folder, split="train", cache_dir=cache)
    loaded = time.perf_counter()
    if formatter:
        batch = ds.with_format("numpy", dtype=None)[:]
    else:
        batch = to_numpy(ds, list(ARRAY_COLUMNS))
    arrays = [batch[name] for name in ARRAY_COLUMNS]
    done = time.perf_counter()
    n_values = sum(values.size for values in arrays[2])
    assert arrays[2][0].dtype == np.float32 and arrays[1][0].dtype == np.int32
    return loaded - start, done - loaded, n_values


def _alternative(folder: Path, cache: Path) -> tuple[float, float, int]:
    import datasets

    start = time.perf_counter()
    ds = datasets.load_dataset(str(folder), split="train", cache_dir=str(cache))
    loaded = time.perf_counter()
    n_values = 0
    for row in ds:
        arrays = {name: np.asarray(row[name]) for name in ARRAY_COLUMNS if name != "token_chunks"}
        arrays["token_chunks"] = [np.asarray(chunk) for chunk in row["token_chunks"]]
        n_values += arrays["logits_values"].size
    done = time.perf_counter()
    return loaded - start, done - loaded, n_values


def _write(rows: list[dict], root: Path) -> tuple[Path, Path, float]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from much_dataset import card

    start = time.perf_counter()
    ours = root / "published"
    card.write_parquet_folder({"train": rows}, ours)
    written = time.perf_counter() - start
    plain = root / "plain" / "data"
    plain.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), plain / "train-00000-of-00001.parquet")
    return ours, plain.parent, written


def _formatter(folder: Path, cache: Path) -> tuple[float, float, int]:
    return _ours(folder, cache, formatter=True)


def _build_rows(rows: list[dict], root: Path) -> tuple[float, float]:
    import json

    import datasets

    from much_dataset.builder import MuchBuilder

    folder = root / "export" / "rows"
    folder.mkdir(parents=True)
    for split, part in (("train", rows[:-200]), ("test", rows[-200:])):
        with (folder / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in part)
    start = time.perf_counter()
    builder = MuchBuilder(config_name="all", data_dir=str(folder.parent), cache_dir=str(root / "cache-build"))
    builder.download_and_prepare()
    builder.as_dataset()
    ours = time.perf_counter() - start
    start = time.perf_counter()
    datasets.load_dataset("json", data_files={"train": str(folder / "train.jsonl"), "test": str(folder / "test.jsonl")},
                          cache_dir=str(root / "cache-json"))
    return ours, time.perf_counter() - start


def _row(name: str, ours: float, formatter: float, alternative: float) -> str:
    return (f"{name:<28} {ours * 1000:9.1f} ms {formatter * 1000:11.1f} ms {alternative * 1000:11.1f} ms "
            f"{alternative / ours:8.1f}x {alternative / formatter:8.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4873)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import datasets

    import much_dataset.loader  # noqa: F401  (imported up front: the first cold run must not pay for imports)

    datasets.disable_progress_bars()
    from much_dataset import synthetic
    from much_dataset.validation import rows_to_table, validate_table

    rows = synthetic.make_rows(args.rows, seed=0, mean_tokens=21.0)
    n_tokens = sum(len(row["output_tokens"]) for row in rows)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ours_folder, plain_folder, write_s = _write(rows, root)
        # Warm-up on a separate tiny folder: one-time costs (lazy imports, module caches) are not the cold load's.
        tiny_ours, tiny_plain, _ = _write(rows[:8], root / "tiny")
        _ours(tiny_ours, root / "cache-tiny")
        _alternative(tiny_plain, root / "cache-tiny")
        for path in [*ours_folder.rglob("*.parquet"), *plain_folder.rglob("*.parquet")]:
            path.read_bytes()  # same OS page-cache state for every cold run
        build_s, json_s = _build_rows(rows, root)
        table = rows_to_table(rows)
        start = time.perf_counter()
        validate_table(table)
        validate_s = time.perf_counter() - start

        runs = (("ours", _ours, ours_folder), ("fmt", _formatter, ours_folder), ("alt", _alternative, plain_folder))
        results: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in runs}
        cold: dict[str, tuple[float, float]] = {}
        for attempt in range(args.repeat + 1):
            # Attempt 0 uses a fresh cache (cold); the next ones reuse it (warm).
            for name, run, folder in runs:
                load_s, numpy_s, n_values = run(folder, root / f"cache-{name}")
                assert n_values == n_tokens * 24
                if attempt == 0:
                    cold[name] = (load_s, numpy_s)
                else:
                    results[name].append((load_s, numpy_s))

    def median(name: str, part: int) -> float:
        return statistics.median(times[part] for times in results[name])

    print(f"synthetic MUCH-shaped data: {args.rows} rows, {n_tokens} tokens, {n_tokens * 24} probabilities")
    print(f"write published folder (validate + parquet + card): {write_s * 1000:.1f} ms; "
          f"validate_table alone: {validate_s * 1000:.1f} ms")
    print(f"build from rows/ JSONL (cold): MuchBuilder {build_s * 1000:.1f} ms; "
          f"datasets 'json' builder (untyped, unvalidated) {json_s * 1000:.1f} ms; ratio {json_s / build_s:.1f}x")
    print(f"{'':<28} {'ours':>12} {'ours+fmt':>14} {'alternative':>14} {'alt/ours':>9} {'alt/fmt':>9}")
    print(_row("cold: load", cold["ours"][0], cold["fmt"][0], cold["alt"][0]))
    print(_row("cold: load + numpy pass", sum(cold["ours"]), sum(cold["fmt"]), sum(cold["alt"])))
    print(_row("warm: load (median)", median("ours", 0), median("fmt", 0), median("alt", 0)))
    print(_row("warm: numpy pass (median)", median("ours", 1), median("fmt", 1), median("alt", 1)))
    total = median("ours", 0) + median("ours", 1)
    print(_row("warm: load + numpy pass", total, median("fmt", 0) + median("fmt", 1),
               median("alt", 0) + median("alt", 1)))
    print("ours = much_dataset.load + loader.to_numpy; ours+fmt = much_dataset.load + with_format('numpy', "
          "dtype=None); alternative = plain list-of-lists parquet + per-row np.asarray")
    print(f"target: warm load + numpy pass < 1 s -> {'MET' if total < 1.0 else 'NOT MET'} ({total:.3f} s)")


if __name__ == "__main__":
    main()
