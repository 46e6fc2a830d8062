#!/usr/bin/env bash
# No lost data: a write that fails part-way (a file size limit, as on a full
# disk), a process killed mid-job, an unreadable input or a refused
# overwrite all leave the previous output byte for byte as it was, with no
# temporary file beside it (except after SIGKILL, which nothing can clean up).
# Usage: bash tests/cli/test_no_lost_data.sh /path/to/bfp   (from the repo root)
set -u
BFP=${1:?usage: test_no_lost_data.sh /path/to/bfp}
case $BFP in /*) ;; */*) BFP=$PWD/$BFP ;; esac
W=$(mktemp -d) || exit 2
trap 'chmod -R u+rwx "$W" 2>/dev/null; rm -rf "$W"' EXIT
pass=0 fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi
}
no_temp() { ! ls -A "$W" | grep -q '^\.bfp-'; } # temporary files and directories
# npy NAME ROWS COLS: f32 values from /dev/urandom (any bits: NaN, Inf too)
npy() {
    python3 - "$W/$1" "$2" "$3" <<'PY'
import os, struct, sys
path, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
hdr = hdr.encode() + b" " * (-(len(hdr) + 11) % 64) + b"\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr)
    f.write(os.urandom(rows * cols * 4))
PY
}
npy in.npy 256 4096    # 4 MiB: the container is 0.5 MiB
npy big.npy 4096 4096  # 64 MiB, for the killed job

"$BFP" quantize -f mxfp4 "$W/in.npy" "$W/out.safetensors" >/dev/null 2>&1
check "first output written" test -s "$W/out.safetensors"
cp "$W/out.safetensors" "$W/ref.safetensors"
"$BFP" dequantize "$W/out.safetensors" "$W/prev.npy" >/dev/null 2>&1
cp "$W/prev.npy" "$W/ref.npy"

# an existing file is not replaced without --force
"$BFP" quantize -f nvfp4 "$W/in.npy" "$W/out.safetensors" >/dev/null 2>"$W/err"
check "overwrite without --force: exit 2" test $? -eq 2
check "overwrite without --force: says so" grep -q "exists (use --force" "$W/err"
check "overwrite without --force: old output intact" cmp -s "$W/out.safetensors" "$W/ref.safetensors"

# a write that fails part-way: a 64 KiB file size limit (EFBIG, as ENOSPC)
(ulimit -f 64; exec "$BFP" quantize --force -f nvfp4 "$W/in.npy" "$W/out.safetensors") \
    >/dev/null 2>"$W/err"
check "quantize past the size limit: exit 2" test $? -eq 2
check "quantize past the size limit: one clear error" \
    grep -q "^bfp: error: cannot write .*out.safetensors (write): File too large" "$W/err"
check "quantize past the size limit: old output intact" cmp -s "$W/out.safetensors" "$W/ref.safetensors"
check "quantize past the size limit: no temporary file" no_temp
(ulimit -f 64; exec "$BFP" dequantize --force "$W/out.safetensors" "$W/prev.npy") \
    >/dev/null 2>"$W/err"
check "dequantize past the size limit: exit 2" test $? -eq 2
check "dequantize past the size limit: old output intact" cmp -s "$W/prev.npy" "$W/ref.npy"
check "dequantize past the size limit: no temporary file" no_temp
mkdir "$W/g"
tail -c $((256 * 4096 * 4)) "$W/in.npy" >"$W/in.bin"
(ulimit -f 64; exec "$BFP" golden -f mxfp8_e4m3 -s 256x4096 "$W/in.bin" "$W/g") \
    >/dev/null 2>"$W/err"
check "golden past the size limit: exit 2" test $? -eq 2
check "golden past the size limit: one clear error" grep -q "File too large" "$W/err"
check "golden past the size limit: OUTDIR still empty, no partial set" \
    test -d "$W/g" -a -z "$(ls -A "$W/g")"

# a job killed at various moments: the old output, or a complete new one
killed=0
for delay in 0.05 0.1 0.2 0.3 0.5 0.8 1.2; do
    cp "$W/ref.safetensors" "$W/k.safetensors"
    { timeout -s KILL "$delay" "$BFP" quantize --force -f mxfp6_e2m3 "$W/big.npy" \
        "$W/k.safetensors" >/dev/null 2>&1; } 2>/dev/null
    rc=$?
    [ $rc -eq 137 ] && killed=$((killed + 1))
    if cmp -s "$W/k.safetensors" "$W/ref.safetensors"; then
        pass=$((pass + 1))
    elif "$BFP" dequantize "$W/k.safetensors" "$W/k.npy" >/dev/null 2>&1; then
        pass=$((pass + 1)) # the job finished before the kill: complete output
        rm -f "$W/k.npy"
    else
        fail=$((fail + 1)); echo "FAIL: killed after ${delay}s (exit $rc): output damaged"
    fi
    rm -f "$W"/.bfp-* # what a killed job could not remove
done
check "at least one job was really killed mid-way" test $killed -gt 0

# an unreadable input
mkdir "$W/dir.npy"
"$BFP" quantize --force -f mxfp4 "$W/dir.npy" "$W/out.safetensors" >/dev/null 2>"$W/err"
check "directory as input: exit 2" test $? -eq 2
check "directory as input: says so" grep -q "is a directory" "$W/err"
check "directory as input: old output intact" cmp -s "$W/out.safetensors" "$W/ref.safetensors"
if [ "$(id -u)" -eq 0 ]; then
    echo "skipped: unreadable-file case (running as root, chmod 000 does not stop reads)"
else
    cp "$W/in.npy" "$W/locked.npy"
    chmod 000 "$W/locked.npy"
    "$BFP" quantize --force -f mxfp4 "$W/locked.npy" "$W/out.safetensors" >/dev/null 2>"$W/err"
    check "unreadable input: exit 2" test $? -eq 2
    check "unreadable input: says so" grep -q "Permission denied" "$W/err"
    check "unreadable input: old output intact" cmp -s "$W/out.safetensors" "$W/ref.safetensors"
fi
check "no temporary file left by any failure" no_temp

echo "test_no_lost_data: $pass passed, $fail failed"
[ $fail -eq 0 ]
