"""context: the top-3 Wikipedia chunks most similar to each model output (docs/reference-behaviour.md#rag-context).

The page's markdown (``wiki.jsonl``) is cut into ~120-token chunks, stride 120, plus a second series starting at
token 60 (half-overlapping); chunks and the model ``output`` (the query, as in the reference) are embedded and the 3
chunks with the highest cosine similarity are kept. One row per generation in ``context.jsonl``: ``generation_id,
wiki_url, status, chunks`` (best first), ``scores``, ``n_candidates``, ``embedding`` (backend:model) and
``chunk_tokenizer`` (the packaged tokenizer that counted the tokens). Pages the ``wiki`` step found ``missing`` or
``disambiguation`` give a row with that status and no chunk (``annotate`` then records a failure for the sample).

Backends: ``--embeddings openai`` (default model ``text-embedding-3-large``, any ``--base-url``) or ``--embeddings
local`` (sentence-transformers; default the packaged all-MiniLM-L6-v2, offline). Chunk embeddings are computed once
per page for all generations of that page. A page whose embeddings fail (after ``--max-attempts`` tries with backoff
on 5xx, 429, timeouts of ``--timeout`` seconds and invalid bodies) is recorded per generation in
``context.failures.jsonl`` and retried by a rerun; a refused API key (401/403) stops the step with one message.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any

from builder import _embeddings as emb
from builder.errors import require_input
from builder.store import JsonlStore, Shard, read_store
from much_dataset.schema import GENERATION_ID, OUTPUT, WIKI_URL

__all__ = ["TOP_CHUNKS", "chunk_text_or_empty", "add_arguments", "run"]

TOP_CHUNKS = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--embeddings", choices=("openai", "local"), default="openai",
                        help="embedding backend (default openai = text-embedding-3-large)")
    parser.add_argument("--embedding-model", default=None,
                        help="API model name (openai) or sentence-transformers path (local)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible API base URL (default $OPENAI_BASE_URL)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--chunk-tokenizer", default="llama3",
                        help="token counter: llama3 (default, cl100k-like), minilm, or a tokenizer.json path")
    parser.add_argument("--chunk-tokens", type=int, default=emb.CHUNK_TOKENS)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per embeddings request (openai)")
    parser.add_argument("--max-attempts", type=int, default=5, help="tries per embeddings batch (openai)")
    parser.add_argument("--backoff", type=float, default=2.0, help="first retry delay in seconds, doubling (openai)")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    out = Path(args.out)
    require_input(out / "generations.jsonl", made_by="generate")
    store = JsonlStore(out / "context.jsonl")
    wiki = {r["wiki_url"]: r for r in read_store(out / "wiki.jsonl")}
    generations = [r for r in read_store(out / "generations.jsonl")]
    generations.sort(key=lambda r: r[GENERATION_ID])
    todo = [r for r in Shard.parse(args.shard).select(generations) if r[GENERATION_ID] not in store]
    by_page: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in todo:
        by_page[row[WIKI_URL]].append(row)
    if not todo:
        print("context: nothing to do")
        return 0

    tokenizer, tokenizer_name = emb.load_chunk_tokenizer(args.chunk_tokenizer)
    options = ({"timeout": args.timeout, "max_attempts": args.max_attempts, "backoff": args.backoff}
               if args.embeddings == "openai" else {})
    embedder = emb.make_embedder(args.embeddings, model=args.embedding_model, base_url=args.base_url,
                                 api_key_env=args.api_key_env, **options)
    size = args.chunk_tokens
    failed = 0
    with tqdm(total=len(todo), desc="context") as bar:
        for url, rows in sorted(by_page.items()):
            page = wiki.get(url)
            if page is None:
                for row in rows:
                    store.record_failure(row[GENERATION_ID], f"generation_id={row[GENERATION_ID]!r}: no wiki.jsonl "
                                                             f"row for field wiki_url={url!r} (run `wiki` first)")
                failed += len(rows)
                bar.update(len(rows))
                continue
            chunks = chunk_text_or_empty(page, tokenizer, size)
            base = {WIKI_URL: url, "embedding": embedder.name, "chunk_tokenizer": tokenizer_name,
                    "chunk_tokens": size, "n_candidates": len(chunks)}
            if not chunks:
                status = page["status"] if page["status"] not in ("ok", "redirected") else "empty_page"
                for row in rows:
                    store.append({GENERATION_ID: row[GENERATION_ID], **base, "status": status, "chunks": [],
                                  "scores": []})
                bar.update(len(rows))
                continue
            try:
                chunk_vectors = embedder.embed(chunks)
                queries = embedder.embed([row[OUTPUT] for row in rows])
            except emb.EmbeddingError as error:  # recorded per item and retried by a rerun; auth errors propagate
                for row in rows:
                    store.record_failure(row[GENERATION_ID], f"generation_id={row[GENERATION_ID]!r}: embeddings "
                                                             f"of wiki_url={url!r} failed: {error}")
                failed += len(rows)
                bar.update(len(rows))
                continue
            for row, query in zip(rows, queries, strict=True):
                order, scores = emb.top_k_similar(query, chunk_vectors, TOP_CHUNKS)
                store.append({GENERATION_ID: row[GENERATION_ID], **base, "status": "ok",
                              "chunks": [chunks[i] for i in order.tolist()],
                              "scores": [round(float(s), 6) for s in scores]})
                bar.update(1)
    print(f"context: {len(todo) - failed} rows written, {failed} failed ({embedder.name}, chunks by {tokenizer_name})")
    return 0 if failed == 0 else 1


def chunk_text_or_empty(page: dict[str, Any], tokenizer: Any, size: int) -> list[str]:
    """Chunks of a usable page's markdown; ``[]`` for missing / disambiguation pages."""
    if page.get("status") not in ("ok", "redirected"):
        return []
    return emb.chunk_text(page.get("markdown") or "", tokenizer, size=size, offset=size // 2)
