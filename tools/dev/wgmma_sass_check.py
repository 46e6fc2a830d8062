#!/usr/bin/env python3
"""wgmma_sass_check.py - the build's wgmma objects through
wgmma_operand_check.py (no A operand or accumulator written in flight, no
wgmma serialized by ptxas), so CI sees what only the GPU scripts checked
before. cuobjdump comes from PATH, the CUDA toolkit's bin (--cuda-bin), or
the NVIDIA tools that Triton carries in the test environment. Exit 77 (ctest:
skipped) when none is found.

    wgmma_sass_check.py [--cuda-bin DIR] OBJECT...
"""
import argparse
import os
import shutil
import subprocess
import sys

import wgmma_operand_check as check


def find_cuobjdump(cuda_bin):
    for cand in (shutil.which("cuobjdump"), cuda_bin and os.path.join(cuda_bin, "cuobjdump")):
        if cand and os.access(cand, os.X_OK):
            return cand
    try:  # Triton's wheel carries cuobjdump for its own use
        import triton

        cand = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                            "cuobjdump")
        return cand if os.access(cand, os.X_OK) else None
    except ImportError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda-bin")
    ap.add_argument("objects", nargs="+")
    a = ap.parse_args()
    tool = find_cuobjdump(a.cuda_bin)
    if not tool:
        print("skipped: no cuobjdump (CUDA toolkit or Triton)")
        return 77
    text = ""
    for obj in a.objects:
        r = subprocess.run([tool, "-sass", obj], capture_output=True, text=True)
        if r.returncode:
            print("wgmma_sass_check: cuobjdump failed on %s: %s" % (obj, r.stderr.strip()))
            return 1
        text += r.stdout
    return check.run(text)


if __name__ == "__main__":
    sys.exit(main())
