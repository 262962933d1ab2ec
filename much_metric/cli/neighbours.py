"""``much neighbours``: token-neighbour statistics for KTC (one small file per tokenizer).

Counts, for every token id, its most frequent left/right neighbours in a corpus tokenised with the generating
model's tokenizer: Wikipedia through ``datasets`` (the reference: ``wikimedia/wikipedia`` ``20231101.<lang>``,
shuffled with seed 42, the first 1.5 M articles of en, fr, de, es, summed) and/or local text files.

Examples::

    # the reference's corpus, one machine (resumable: re-run the same command after a kill)
    much neighbours --tokenizer meta-llama/Llama-3.1-8B-Instruct --wikipedia en,fr,de,es --articles 1500000 \\
        --out work/llama31 --output stats/llama31.npz
    # the same as 8 SLURM tasks, then one reduce (scripts/cluster/neighbours.sbatch)
    much neighbours ... --out work/llama31 --shard 3/8
    much neighbours ... --out work/llama31 --reduce --output stats/llama31.npz
    # local text (the embedded sample's statistics)
    much neighbours --tokenizer smollm2 --files data/mushroom/*.jsonl --jsonl-fields model_input,model_output_text \\
        --out work/smollm2 --output much_metric/data/neighbours/smollm2.npz
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "neighbours", help="count token-neighbour statistics for KTC (sharded, resumable)", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tokenizer", required=True,
                        help="hub id, folder, tokenizer.json, .gguf file or 'smollm2' (the generating LLM's)")
    parser.add_argument("--out", required=True, help="work folder (block counts, shard markers); resumable")
    parser.add_argument("--output", default=None, help="the statistics file (default: <out>/neighbours.npz)")
    parser.add_argument("--wikipedia", default=None, help="comma-separated languages of wikimedia/wikipedia")
    parser.add_argument("--wikipedia-date", default="20231101", help="dump date of the config (default 20231101)")
    parser.add_argument("--hub-dataset", default="wikimedia/wikipedia",
                        help="hub dataset (or local dataset folder) read for --wikipedia; config <date>.<lang>")
    parser.add_argument("--articles", type=int, default=1_500_000, help="articles per language (default 1.5M)")
    parser.add_argument("--no-streaming", action="store_true",
                        help="download the dataset and shuffle it whole (the reference's exact article selection)")
    parser.add_argument("--files", nargs="*", default=[], help="local .txt (one document a line) or .jsonl files")
    parser.add_argument("--jsonl-fields", default="", help="comma-separated text fields of the .jsonl records")
    parser.add_argument("--shard", default="0/1", help="i/n: count only this shard's blocks (default 0/1: all)")
    parser.add_argument("--reduce", action="store_true", help="only merge the finished shards into --output")
    parser.add_argument("--position", type=int, choices=(0, 1), default=0,
                        help="0: left and right neighbours (KTC's default); 1: right only")
    parser.add_argument("--block-size", type=int, default=10_000, help="documents per block (default 10000)")
    parser.add_argument("--keep", type=int, default=64, help="neighbours kept per token and block (default 64)")
    parser.add_argument("--top", type=int, default=8, help="neighbours per token in the output (default 8)")
    parser.add_argument("--corpus-name", default=None, help="corpus description stored in the file")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def _sources(args: argparse.Namespace) -> list:
    from much_metric.baselines.neighbour_job import files_source, hub_source

    sources = []
    for lang in filter(None, (args.wikipedia or "").split(",")):
        sources.append(hub_source(args.hub_dataset, f"{args.wikipedia_date}.{lang.strip()}", n_articles=args.articles,
                                  streaming=not args.no_streaming))
    if args.files:
        sources.append(files_source(args.files, jsonl_fields=[f for f in args.jsonl_fields.split(",") if f]))
    if not sources:
        raise ValueError("give a corpus: --wikipedia LANGS and/or --files")
    return sources


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    try:
        from much_metric.baselines.neighbour_job import CountOptions, count_shard, parse_shard, reduce_shards
        from much_metric.models import load_tokenizer

        shard = parse_shard(args.shard)
        if Path(args.tokenizer).exists():  # tokenizer.json, folder, .gguf or tekken file
            from much_metric.cli.segment import load_tokenizer_argument as load_local

            tokenizer = load_local(args.tokenizer)
        else:  # 'smollm2' or a hub id
            tokenizer = load_tokenizer(args.tokenizer)
        output = Path(args.output) if args.output else Path(args.out) / "neighbours.npz"
        if not args.reduce:
            summary = count_shard(_sources(args), tokenizer, args.out, tokenizer_name=args.tokenizer, shard=shard,
                                  options=CountOptions(block_size=args.block_size, keep=args.keep,
                                                       position=args.position),
                                  progress=not args.no_progress)
            print(f"shard {summary['shard']}: {summary['counted']} blocks counted, {summary['skipped']} already done")
            if shard[1] > 1:
                return 0
        stats = reduce_shards(args.out, tokenizer, top=args.top, corpus=args.corpus_name)
        stats.save(output)
        print(f"{output}: {stats.describe()}")
        return 0
    except (ValueError, TypeError, FileNotFoundError, OSError) as error:
        print(f"much neighbours: error: {error}", file=sys.stderr)
        return 2
