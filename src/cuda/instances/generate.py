#!/usr/bin/env python3
"""Writes the CUDA launcher instances, one file per format and direction
(quant_<format>.cu, dequant_<format>.cu), and formats.h (the formats with GPU
kernels), from the format list in src/core/format_defs.h: the rows whose CUDA
column is 1. Run it after adding a format; `--check` (ctest
cuda_instances_current) fails when the files here differ from what it would
write."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFS = os.path.join(HERE, "..", "..", "core", "format_defs.h")


def formats():
    text = open(DEFS).read()
    body = text[text.index("#define BFP_FORMAT_LIST(X)"):]
    body = body[:body.index("\n\n")]
    rows = []
    for m in re.finditer(r"X\(\s*(\w+),\s*\"([^\"]+)\",\s*(\w+),\s*\w+,\s*\d+,[^,]*,\s*\w+,\s*([01])\s*,", body):
        ident, name, family, cuda = m.groups()
        if cuda == "1":
            rows.append((ident, name, family))
    if not rows:
        sys.exit("generate.py: no format rows found in " + DEFS)
    return rows


def takes_2d(family):
    """Does the family's row of facts accept BFP_OPT_2D (16x16 tiles)?"""
    text = open(DEFS).read().replace("\\\n", " ")
    m = re.search(r"#define BFP_FAMILY_%s_FACTS([^\n]*)" % family, text)
    if not m:
        sys.exit("generate.py: no facts for family %s in %s" % (family, DEFS))
    return "BFP_OPT_2D" in m.group(1)


def files():
    out = {}
    rows = formats()
    lines = ["/* formats.h - the formats with GPU kernels: one X(ID) per row of",
             " * BFP_FORMAT_LIST (src/core/format_defs.h) whose CUDA column is 1.",
             " * Written by generate.py; do not edit. */",
             "#ifndef BFP_CUDA_INSTANCE_FORMATS_H",
             "#define BFP_CUDA_INSTANCE_FORMATS_H",
             "",
             "#define BFP_CUDA_FORMATS(X) \\"]
    lines += ["    X(%s)%s" % (ident, " \\" if i + 1 < len(rows) else "")
              for i, (ident, _, _) in enumerate(rows)]
    lines += ["", "#endif /* BFP_CUDA_INSTANCE_FORMATS_H */", ""]
    out["formats.h"] = "\n".join(lines)
    for ident, name, family in rows:
        low = ident.lower()
        q = ["/* %s: the quantize launcher (written by generate.py). */" % name,
             '#include "bfp_cuda_launch_quant.cuh"',
             "",
             "template bfp_status bfpcuda::launch_quant<BFP_%s>(bfpcuda::QParams, const bfpcuda::Tiling &,"
             % ident,
             "                                                   cudaStream_t);"]
        if takes_2d(family):
            q.append("template bfp_status bfpcuda::launch_nv2d<BFP_%s>(bfpcuda::QParams, cudaStream_t);" % ident)
        out["quant_%s.cu" % low] = "\n".join(q) + "\n"
        d = ["/* %s: the dequantize launcher (written by generate.py). */" % name,
             '#include "bfp_cuda_launch_dequant.cuh"',
             "",
             "template bfp_status bfpcuda::launch_dequant<BFP_%s>(bfpcuda::DParams, const bfpcuda::Tiling &,"
             % ident,
             "                                                     const bfp_cuda_quant_tuning *, cudaStream_t);"]
        out["dequant_%s.cu" % low] = "\n".join(d) + "\n"
    return out


def main():
    check = "--check" in sys.argv[1:]
    want = files()
    have = {f for f in os.listdir(HERE) if f.endswith(".cu") or f == "formats.h"}
    stale = sorted(have - set(want))
    bad = [f for f, t in want.items()
           if not os.path.exists(os.path.join(HERE, f)) or open(os.path.join(HERE, f)).read() != t]
    if check:
        if stale or bad:
            sys.exit("src/cuda/instances is out of date (%s); run src/cuda/instances/generate.py"
                     % ", ".join(bad + stale))
        return
    for f in stale:
        os.remove(os.path.join(HERE, f))
    for f in bad:
        open(os.path.join(HERE, f), "w").write(want[f])


if __name__ == "__main__":
    main()
