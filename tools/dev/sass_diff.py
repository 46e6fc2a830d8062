#!/usr/bin/env python3
"""Compare the SASS of two builds kernel by kernel: sass_diff.py BEFORE.a AFTER.a
(libbfp_cuda.a of each). Runs `cuobjdump -sass` on both (cuobjdump and nvdisasm
on PATH), splits the listings per kernel (mangled name; anonymous-namespace
names lose their path hash), collapses runs of blanks and compares. Exit 0
when every kernel is in both and identical. Used to show that a refactor of
src/cuda leaves the generated code alone."""
import re
import subprocess
import sys


def kernels(archive):
    text = subprocess.run(["cuobjdump", "-sass", archive], check=True, capture_output=True,
                          text=True).stdout
    out, cur, buf = {}, None, []

    def flush():
        if cur is not None:
            out[cur] = re.sub(r"[ \t]+", " ", "\n".join(buf))

    for line in text.split("\n"):
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            flush()
            cur, buf = re.sub(r"_GLOBAL__N__[0-9a-f]+_\d+_\w+?_[0-9a-f]{8}", "_GLOBAL__N_",
                              m.group(1)), []
        elif line.strip().startswith(".....") or line.startswith(("Fatbin", "member")):
            flush()
            cur, buf = None, []
        elif cur is not None:
            buf.append(line)
    flush()
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: sass_diff.py BEFORE.a AFTER.a")
    a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
    diff = sorted(k for k in a if k in b and a[k] != b[k])
    only = sorted(set(a) ^ set(b))
    print("kernels: %d before, %d after, %d identical, %d different, %d in one only"
          % (len(a), len(b), len(a) - len(diff) - len(set(a) - set(b)), len(diff), len(only)))
    for k in diff:
        print("different:", k)
    for k in only:
        print("in one only:", k)
    sys.exit(1 if diff or only else 0)


if __name__ == "__main__":
    main()
