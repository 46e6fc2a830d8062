#!/usr/bin/env python3
"""wgmma_operand_check.py - read `cuobjdump -sass` output (a file, or stdin)
and fail when an instruction writes a register that an HGMMA still reads as
its A operand: between the HGMMA (QGMMA for FP8) and the WARPGROUP.DEPBAR
that ends its group. PTX makes that undefined; gemm_wgmma.cu once did it (docs/gemm.md).
It also fails when an instruction reads or writes an in-flight group's fp32
accumulator (D: N/2 registers from the first operand of a 64xN GMMA).

It also fails on a function whose wgmma ptxas serialized (its "C7513
Potential Performance Loss" note, which a build does not stop on): three
groups of one GMMA in a row, each waited for with DEPBAR.LE gsb0, 0x0 before
the next. No mainloop of ours waits so (the serial one waits once for a
group of four; the step mainloop keeps three in flight).

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


def serialized(code):
    """the addresses of GMMAs that start a run of three one-GMMA groups, each
    waited for completely before the next is issued"""
    runs, found = 0, []
    in_group, waited = 0, True  # GMMAs in the open group; a wait 0 since the last group
    for addr, x in code:
        if GMMA.search(x):
            in_group += 1
            if "gsb0" in x:
                single = in_group == 1
                runs = runs + 1 if single and waited else (1 if single else 0)
                if runs == 3:
                    found.append("/*%04x*/ %s" % (addr, x))
                in_group, waited = 0, False
            continue
        d = DEPBAR.search(x)
        if d:
            waited = int(d.group(1), 16) == 0
    return found


def run(text):
    """check a cuobjdump -sass listing; print the findings; the exit code"""
    bad = checked = 0
    for name, code in functions(text):
        if not any(GMMA.search(x) for _, x in code):
            continue
        checked += 1
        c, z = clobbers(code), serialized(code)
        if c:
            print("%s: %d uses of in-flight GMMA registers, e.g." % (name, len(c)))
            for line in c[:5]:
                print("   ", line)
        if z:
            print("%s: wgmma serialized by ptxas (one GMMA a group, each waited for), at" % name)
            for line in z[:3]:
                print("   ", line)
        bad += bool(c or z)
    if not checked:
        print("wgmma_operand_check: no HGMMA in the input")
        return 2
    print("wgmma_operand_check: %d functions with HGMMA, %d with clobbers or serialized"
          % (checked, bad))
    return 1 if bad else 0


def main():
    return run(open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read())


if __name__ == "__main__":
    sys.exit(main())
