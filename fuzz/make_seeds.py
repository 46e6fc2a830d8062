#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets (fuzz/corpus/<target>/).

Deterministic and small: a handful of inputs per target that reach each
branch of its input layout (see the comment at the top of each fuzz_*.c).
Run from anywhere: python3 fuzz/make_seeds.py
"""
import os
import random
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
NFORMATS = 22


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def seeds_dequant(rng):
    # format index, rows, cols (u16), dtype, then plane bytes
    for fi in (0, 3, 7, 8, 9, 16, 21):
        body = bytes(rng.randrange(256) for _ in range(96))
        put("dequant", "fmt%02d" % fi, bytes([fi, 1]) + struct.pack("<H", 40) + bytes([fi % 3]) + body)
    # NaN scale codes everywhere
    put("dequant", "nan_scales", bytes([0, 2, 31, 0, 0]) + b"\xff" * 64)


def seeds_differential(rng):
    # format, rows, cols (u16), dtype, options, scale exponent, values
    for fi in (0, 5, 7, 8, 9, 12, 16, 21):
        vals = bytes(rng.randrange(96) for _ in range(64))
        put("differential", "fmt%02d" % fi,
            bytes([fi, 0]) + struct.pack("<H", 35) + bytes([fi % 3, 0, 128]) + vals)
    raw = bytes([200]) + struct.pack("<f", 1.5)
    put("differential", "raw_f32", bytes([1, 1, 63, 0, 0, 0, 100]) + raw * 64)


def seeds_verify_layouts(rng):
    put("verify_layouts", "ggml_mxfp4", bytes([0, 0, 1, 1, 0]) + bytes(rng.randrange(256) for _ in range(68)))
    put("verify_layouts", "ggml_nvfp4", bytes([0, 1, 1, 0, 0]) + bytes(rng.randrange(256) for _ in range(72)))
    put("verify_layouts", "hif4_golden", bytes([1, 4]) + bytes(rng.randrange(256) for _ in range(16)))
    put("verify_layouts", "swizzled", bytes([2, 3, 0, 2]) + bytes(rng.randrange(256) for _ in range(512)))
    vals = struct.pack("<32f", *[rng.uniform(-8, 8) for _ in range(32)])
    put("verify_layouts", "verify_hif4", bytes([3, 8, 0, 31, 1, 4]) + vals + bytes([0, 1] * 20))
    put("verify_layouts", "verify_nvfp4", bytes([3, 7, 1, 31, 1, 4]) + vals + bytes([0, 0, 4] * 20))


def seeds_cli_args(rng):
    put("cli_args", "shape", b"\x00128x4096")
    put("cli_args", "format", b"\x01mxfp4,nvfp4+,HIF4")
    put("cli_args", "u64", b"\x020x1234")
    put("cli_args", "options", b"\x03\x00stochastic\x00\x0142")
    put("cli_args", "formats", b"\x04--json")
    put("cli_args", "verify", b"\x05-f\x00mxfp4\x00-s\x002x32\x00--layout\x00ggml\x00in.bin\x00dut")


def main():
    rng = random.Random(8)
    for fn in (seeds_dequant, seeds_differential, seeds_verify_layouts, seeds_cli_args):
        fn(rng)


if __name__ == "__main__":
    main()
