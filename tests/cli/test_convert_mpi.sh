#!/usr/bin/env bash
# `mpirun -n N bfp convert` (issue #25): any rank count gives the bytes of a
# plain run (every output file, the index, config.json and the manifest) in
# the bfp, compressed-tensors and gguf layouts, whole shards spread over the
# ranks and the tensors of one shard cut between them; a rank killed mid-run
# makes the job fail and leaves a state that a rerun with any rank count (or
# none) completes identically; a rank that fails makes the job exit non-zero
# with that rank's message, once, and no index. Registered only in a build
# with MPI (tests/CMakeLists.txt).
# Usage: bash tests/cli/test_convert_mpi.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
ROOT=$PWD
PY=${PYTHON:-python3}
MPIRUN=${MPIEXEC:-mpirun}
# CI runs as root, which OpenMPI refuses without these; the ranks of a test
# share the CI machine's few cores (--oversubscribe below).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# OpenMPI's own start-up allocations are not freed at exit: under ASan only
# the leak check is off (test_convert_ckpt.sh checks convert's leaks).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mpi() { # mpi N ARGS...: bfp ARGS under mpirun with N ranks
    local n=$1; shift
    "$MPIRUN" --oversubscribe -n "$n" "$BFP" "$@"
}
same_json() { # the summaries of two runs agree but for OUT and the time
    "$PY" -c 'import json,sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for j in (a, b): j.pop("output"); j.pop("seconds")
assert a == b, (a, b)' "$1" "$2"
}

"$PY" "$ROOT/tests/tools/make_ckpt.py" "$W/in" || exit 2
"$MPIRUN" --oversubscribe -n 2 true >/dev/null 2>&1 || { echo "mpirun cannot start 2 ranks here"; exit 2; }

# ---- any rank count: the bytes of the plain run, in every layout
for spec in "bfp mxfp4" "compressed-tensors nvfp4" "compressed-tensors mxint4"; do
    set -- $spec
    lay=$1 fmt=$2 ref="$W/ref-$1-$2"
    "$BFP" convert -f "$fmt" --layout "$lay" --report --json "$W/in" "$ref" >"$ref.json" 2>"$W/err"
    check "$lay $fmt: plain run exit 0" test $? -eq 0
    for n in 1 2 3 4; do # 4 ranks > 3 shards: each shard's tensors cut between ranks
        out="$W/n$n-$lay-$fmt"
        mpi $n convert -f "$fmt" --layout "$lay" --report --json "$W/in" "$out" >"$out.json" 2>"$W/err"
        check "$lay $fmt -n $n: exit 0" test $? -eq 0
        check "$lay $fmt -n $n: identical to the plain run (manifest too)" diff -r "$ref" "$out"
        check "$lay $fmt -n $n: the same summary, SQNRs of every rank's tensors included" \
            same_json "$ref.json" "$out.json"
        check "$lay $fmt -n $n: no manifest part left" test -z "$(find "$out" -name '.bfp-convert.part-*')"
    done
done
"$BFP" convert -f mxfp4 --layout gguf "$W/in" "$W/ref.gguf" >/dev/null 2>&1
for n in 2 3; do # one output file: the ranks write its tensors at their offsets
    mpi $n convert -f mxfp4 --layout gguf "$W/in" "$W/n$n.gguf" >/dev/null 2>"$W/err"
    check "gguf -n $n: exit 0" test $? -eq 0
    check "gguf -n $n: identical to the plain run" cmp -s "$W/ref.gguf" "$W/n$n.gguf"
done
one="$W/in/model-00002-of-00003.safetensors"
"$BFP" convert -f mxfp4 "$one" "$W/one-ref" >/dev/null 2>&1
mpi 3 convert -f mxfp4 "$one" "$W/one3" >/dev/null 2>&1
check "one shard, -n 3 (its tensors cut by bytes): identical" diff -r "$W/one-ref" "$W/one3"

# ---- a rank killed mid-run, then a failing rank, then reruns
ref="$W/ref-bfp-mxfp4"
k="$W/k"
# 2 ranks: rank 0 has the largest output shard (1 of 3: 5 tensors), rank 1
# the two others (largest first to the least loaded rank): 2 (4 tensors),
# then 3. Rank 1 dies on its fifth tensor, the first of shard 3.
BFP_CONVERT_TEST_DIE_AFTER=5 BFP_CONVERT_TEST_DIE_RANK=1 \
    mpi 2 convert -f mxfp4 "$W/in" "$k" >"$W/out" 2>"$W/err"
rc=$?
check "rank 1 killed (SIGKILL on its 5th tensor): the job exits non-zero" test $rc -ne 0
check "killed: no index, no config.json" test ! -e "$k/model.safetensors.index.json" -a ! -e "$k/config.json"
check "killed: rank 1's finished shard is recorded in its part" \
    grep -q 'model-00002-of-00003.safetensors' "$k/.bfp-convert.part-1.json"
check "killed: shard 3 not finished" test ! -e "$k/model-00003-of-00003.safetensors"
# block the temporary name of rank 1's second shard (its half-written
# temporary is there: a directory in its place)
rm -f "$k/.model-00003-of-00003.safetensors.bfp-tmp"
mkdir "$k/.model-00003-of-00003.safetensors.bfp-tmp"
mpi 2 convert -f mxfp4 "$W/in" "$k" >"$W/out" 2>"$W/err"
rc=$?
check "a failing rank: the job exits non-zero" test $rc -ne 0
check "a failing rank: one error line, with its rank and message" \
    test "$(grep -c '^bfp: error: ' "$W/err")" -eq 1
check "  ... 'rank 1: ...bfp-tmp: cannot create'" \
    grep -q '^bfp: error: rank 1: .*model-00003-of-00003.safetensors.bfp-tmp: cannot create' "$W/err"
check "a failing rank: no summary on stdout" test ! -s "$W/out"
check "a failing rank: no index, no config.json" \
    test ! -e "$k/model.safetensors.index.json" -a ! -e "$k/config.json"
rmdir "$k/.model-00003-of-00003.safetensors.bfp-tmp"
cp -a "$k" "$W/k1"
cp -a "$k" "$W/k4"
mpi 3 convert -f mxfp4 --json "$W/in" "$k" >"$W/j" 2>"$W/err"
check "rerun with 3 ranks: exit 0" test $? -eq 0
check "rerun with 3 ranks: the 2 finished shards kept" \
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["shards_kept"] == 2, j' "$W/j"
check "rerun with 3 ranks: identical to the plain run" diff -r "$ref" "$k"
"$BFP" convert -f mxfp4 --json "$W/in" "$W/k1" >"$W/j" 2>"$W/err"
check "rerun of the same state as one process: exit 0" test $? -eq 0
check "  ... keeps the shards the ranks' parts vouch for" \
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["shards_kept"] == 2, j' "$W/j"
check "  ... identical to the plain run" diff -r "$ref" "$W/k1"
mpi 4 convert -f mxfp4 --json "$W/in" "$W/k4" >"$W/j" 2>"$W/err"
check "rerun with 4 ranks (more than shards: tensors cut, each shard's owner checks it): exit 0" \
    test $? -eq 0
check "  ... keeps the 2 finished shards" \
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["shards_kept"] == 2, j' "$W/j"
check "  ... identical to the plain run" diff -r "$ref" "$W/k4"

# a rank killed while the tensors of one shard are cut between the ranks
BFP_CONVERT_TEST_DIE_AFTER=1 BFP_CONVERT_TEST_DIE_RANK=2 \
    mpi 3 convert -f mxfp4 "$one" "$W/one-k" >/dev/null 2>&1
check "one shard, rank 2 killed: non-zero exit" test $? -ne 0
check "  ... no finished shard" test ! -e "$W/one-k/model-00002-of-00003.safetensors"
mpi 2 convert -f mxfp4 "$one" "$W/one-k" >/dev/null 2>&1
check "  ... rerun with 2 ranks: identical" diff -r "$W/one-ref" "$W/one-k"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
