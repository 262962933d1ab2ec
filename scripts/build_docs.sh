#!/usr/bin/env bash
# Builds the documentation site into site/ with warnings as errors (mkdocs build --strict).
# Needs the docs extra in the active environment: pip install -e ".[docs]" (with the core installed, since the
# API reference and the generated command-line/data tables import the packages).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python -c "import mkdocs, mkdocstrings, material" 2>/dev/null; then
    echo "build_docs.sh: error: MkDocs is not installed; run: pip install -e '.[docs]'" >&2
    exit 2
fi
start=$(date +%s)
# HF_HUB_OFFLINE: the hooks import the packages; nothing may reach the hub while building.
NO_MKDOCS_2_WARNING=1 HF_HUB_OFFLINE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python -m mkdocs build --strict --clean --site-dir site "$@"
echo "docs built in site/ ($(( $(date +%s) - start )) s)"
