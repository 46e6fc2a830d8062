#!/usr/bin/env python3
"""wgmma_operand_check.py - read `cuobjdump -sass` output (a file, or stdin)
and fail when an instruction writes a register that an HGMMA still reads as
its A operand: between the HGMMA (QGMMA for FP8) and the WARPGROUP.DEPBAR
that ends its group. PTX makes that undefined; gemm_wgmma.cu once did it (docs/gemm.md).
It also fails when an instruction reads or writes an in-flight group's fp32
accumulator (D: N/2 registers from the first operand of a 64xN GMMA).

Each loop that holds an HGMMA is scanned three times in a row, so the
groups still pending at its back edge meet the next iteration's writes.
Branches inside a loop are ignored (a linear scan). Exit 0: no clobber;
1: clobbers (listed); 2: no HGMMA found (nothing was checked).

    cuobjdump -sass gemm_wgmma.cu.o | python3 tools/dev/wgmma_operand_check.py
"""
import re
import sys

INSTR = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;")
HGMMA_A = re.compile(r"[HQ]GMMA\.\S+ R\d+, R(\d+),")
GMMA = re.compile(r"\b[HQ]GMMA\.")  # QGMMA: the FP8 form (gemm_xq_wgmma.cu)
GMMA_D = re.compile(r"[HQ]GMMA\.64x(\d+)x\d+\.F32\S* R(\d+),")
REGS = re.compile(r"\bR(\d+)\b")
DEPBAR = re.compile(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x([0-9a-f]+)")
BRANCH = re.compile(r"BRA (0x[0-9a-f]+)")
DEST = re.compile(r"^(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9._]*)\s+R(\d+)\b")
NO_DEST = ("ST", "BRA", "RED", "ATOM", "SYNCS", "BAR", "WARPSYNC", "ISETP", "FSETP")


def functions(text):
    for part in re.split(r"\n\s*Function : ", text)[1:]:
        name = part.split("\n", 1)[0].strip()
        code = [(int(m.group(1), 16), m.group(2)) for m in map(INSTR.match, part.split("\n")) if m]
        yield name, code


def clobbers(code):
    addrs = [a for a, _ in code]
    found = []
    for i, (a, ins) in enumerate(code):
        m = BRANCH.search(ins)
        if not m or int(m.group(1), 16) >= a or int(m.group(1), 16) not in addrs:
            continue
        body = code[addrs.index(int(m.group(1), 16)) : i + 1]
        if not any(GMMA.search(x) for _, x in body):
            continue
        pending, cur, dcur = [], set(), set()  # groups: (A registers, D registers)
        for addr, x in body * 3:
            if GMMA.search(x):
                h = HGMMA_A.search(x)
                if h:
                    cur |= set(range(int(h.group(1)), int(h.group(1)) + 4))
                dm = GMMA_D.search(x)
                if dm:
                    dcur |= set(range(int(dm.group(2)), int(dm.group(2)) + int(dm.group(1)) // 2))
                if "gsb0" in x:
                    pending.append((cur, dcur))
                    cur, dcur = set(), set()
                continue
            d = DEPBAR.search(x)
            if d:
                del pending[: max(0, len(pending) - int(d.group(1), 16))]
                continue
            w = DEST.match(x)
            live = cur.union(*[a for a, _ in pending])
            dlive = dcur.union(*[dd for _, dd in pending])
            if w and not w.group(1).startswith(NO_DEST) and int(w.group(2)) in live:
                found.append("/*%04x*/ %s" % (addr, x))
            elif any(int(r) in dlive for r in REGS.findall(x)):
                found.append("/*%04x*/ %s (in-flight accumulator)" % (addr, x))
    return sorted(set(found))


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    bad = checked = 0
    for name, code in functions(text):
        if not any(GMMA.search(x) for _, x in code):
            continue
        checked += 1
        c = clobbers(code)
        if c:
            bad += 1
            print("%s: %d uses of in-flight GMMA registers, e.g." % (name, len(c)))
            for line in c[:5]:
                print("   ", line)
    if not checked:
        print("wgmma_operand_check: no HGMMA in the input")
        return 2
    print("wgmma_operand_check: %d functions with HGMMA, %d with clobbers" % (checked, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
