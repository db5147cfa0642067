#!/usr/bin/env bash
# What benchmarks/training/grpo_vs_control/grpo_vs_control.py needs on a GPU machine without a network, in parts that
# each fit one transfer, and how to put it together there.
#
#   benchmarks/tools/offline_bundle.sh bundle MODEL.gguf [DIR] [PART_MB]   # here (with .venv)
#   benchmarks/tools/offline_bundle.sh unpack [DIR]                        # there, parts all arrived
#
# bundle: downloads the wheels the training stack on such a machine lacks (the library's own
# dependencies and TRL; torch, transformers, accelerate, peft, pyarrow are assumed there), at the
# versions .venv holds, for CPython 3.12 x86-64, and splits them and the model into DIR/1, DIR/2,
# ... of at most PART_MB (default 56: a 64 MiB transfer less the repository) each. The largest
# wheel must fit a part on its own.
# unpack: copies every part that has arrived to /tmp/offline (a part per transfer: run it after
# each one), and once all have, installs the wheels into /tmp/offline/site, joins the model
# (/tmp/offline/model.gguf, checked against its sha256) and links the application folders into
# gymflow/ as the install would (the registry finds environments through gymflow/environments).
# Then: PYTHONPATH=/tmp/offline/site python3 benchmarks/training/grpo_vs_control/grpo_vs_control.py --model
# /tmp/offline/model.gguf ...
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS="trl datasets dill multiprocess fastapi starlette pydantic pydantic_core annotated-types
typing-inspection typing_extensions orjson pandera typeguard polars polars-runtime-32 datasketch
gguf uvicorn opentelemetry-api"

bundle() {
    local model=$1 dir=${2:-.offline} part_mb=${3:-56}
    local limit=$((part_mb * 1000 * 1000)) staging
    staging=$(mktemp -d)
    rm -rf "$dir" && mkdir -p "$dir"
    for name in $WHEELS; do
        version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('$name'))")
        .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -d "$staging" "$name==$version" 2>&1 | grep -v WARNING || true
    done
    sha256sum "$model" | cut -d' ' -f1 >"$staging/model.sha256"
    split -b "$((limit / 2))" -d -a 2 "$model" "$staging/model.gguf."
    # largest first, each into the first part with room (first fit)
    local n=0
    declare -A used=()
    while read -r size file; do
        local placed=""
        for ((i = 1; i <= n; i++)); do
            if ((used[$i] + size <= limit)); then placed=$i && break; fi
        done
        if [ -z "$placed" ]; then n=$((n + 1)) && placed=$n && used[$n]=0 && mkdir -p "$dir/$n"; fi
        mv "$file" "$dir/$placed/" && used[$placed]=$((used[$placed] + size))
    done < <(find "$staging" -type f -printf '%s %p\n' | sort -rn)
    rm -rf "$staging"
    local manifest
    manifest=$(cd "$dir" && ls */ | grep -v '/:$' | grep . | sort)
    for ((i = 1; i <= n; i++)); do echo "$manifest" >"$dir/$i/manifest"; done
    du -sh "$dir"/*
    echo "carry $dir/1 ... $dir/$n, one a transfer; after each: benchmarks/tools/offline_bundle.sh unpack $dir"
}

unpack() {
    local dir=${1:-.offline} dest=/tmp/offline
    mkdir -p "$dest/in"
    for part in "$dir"/*/; do [ -d "$part" ] && cp -n "$part"* "$dest/in/"; done
    local missing
    missing=$(while read -r f; do [ -f "$dest/in/$f" ] || echo "$f"; done <"$dest/in/manifest" | wc -l)
    if [ "$missing" -gt 0 ]; then echo "waiting for $missing more files (other parts)" && return 0; fi
    cat "$dest"/in/model.gguf.* >"$dest/model.gguf"
    if [ "$(sha256sum "$dest/model.gguf" | cut -d' ' -f1)" != "$(cat "$dest/in/model.sha256")" ]; then
        echo "the joined model does not match its sha256" >&2 && return 1
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$dest/site" "$dest"/in/*.whl
    for app in cli flows tasks deployments environments; do ln -sfn "../$app" "gymflow/$app"; done
    echo "ready: PYTHONPATH=$dest/site, model $dest/model.gguf"
}

case "${1:-}" in
bundle) shift && bundle "$@" ;;
unpack) shift && unpack "$@" ;;
*) sed -n 2,19p "$0" && exit 2 ;;
esac
