#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets (fuzz/corpus/<target>/).

Deterministic and small: a handful of inputs per target that reach each
branch of its input layout (see the comment at the top of each fuzz_*.c).
Run from anywhere: python3 fuzz/make_seeds.py
"""
import json
import os
import random
import shutil
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tools"))
import gguf_write as gw  # noqa: E402

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
    # `bfp verify` on files: selector 4, format, rows-1, cols-1, layout, input
    # values, then (count, (name index, u16 size, bytes)...)
    r = random.Random(3)
    x = struct.pack("<128f", *[r.uniform(-4, 4) for _ in range(128)])
    blk = bytes(r.randrange(256) for _ in range(68))
    put("verify_layouts", "cli_ggml", bytes([4, 0, 1, 63, 2]) + x + bytes([1, 9]) + struct.pack("<H", 68) + blk)
    x2 = struct.pack("<32f", *[r.uniform(-4, 4) for _ in range(32)])
    put("verify_layouts", "cli_planar_guess", bytes([4, 0, 0, 31, 4]) + x2 + bytes([2, 0]) + struct.pack("<H", 16)
        + bytes(16) + bytes([1]) + struct.pack("<H", 1) + b"\x7f")


def seeds_cli_args(rng):
    put("cli_args", "shape", b"\x00128x4096")
    put("cli_args", "format", b"\x01mxfp4,nvfp4+,HIF4")
    put("cli_args", "u64", b"\x020x1234")
    put("cli_args", "options", b"\x03\x00stochastic\x00\x0142")
    put("cli_args", "formats", b"\x04--json")
    put("cli_args", "verify", b"\x05-f\x00mxfp4\x00-s\x002x32\x00--layout\x00ggml\x00in.bin\x00dut")


def npy(descr, shape, data, version=1):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    hdr = hdr.encode() + b" " * (-(len(hdr) + 11) % 16) + b"\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + data
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(hdr)) + hdr + data


def seeds_npy(rng):
    io = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "io_data")
    for f in ("np_bf16.npy", "np_f16_v2.npy", "np_f32.npy", "np_scalar.npy"):
        shutil.copy(os.path.join(io, f), os.path.join(ROOT, "npy", f))
    put("npy", "f32_2x3_v3", npy("<f4", "(2, 3)", struct.pack("<6f", *range(6)), 3))
    put("npy", "bf16_1d", npy("bfloat16", "(4,)", b"\x80\x3f" * 4))
    put("npy", "big_endian", npy(">f4", "(1,)", b"\0\0\0\0"))
    put("npy", "fortran", npy("<f4", "(1,)", b"\0\0\0\0").replace(b"False", b"True "))


def safetensors(entries, meta=None):
    h = {}
    if meta:
        h["__metadata__"] = meta
    data = b""
    for name, dtype, shape, blob in entries:
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    j = json.dumps(h, separators=(",", ":")).encode()
    j += b" " * (-len(j) % 8)
    return struct.pack("<Q", len(j)) + j + data


def seeds_safetensors(rng):
    io = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "io_data")
    shutil.copy(os.path.join(io, "st_ref.safetensors"), os.path.join(ROOT, "safetensors", "st_ref"))
    put("safetensors", "one_f32", safetensors([("t", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))]))
    put("safetensors", "two", safetensors([("weight", "BF16", [3], b"\x80\x3f" * 3),
                                           ("bias", "F16", [1], b"\x00\x3c")], {"k": "v"}))
    put("safetensors", "u8_only", safetensors([("x", "U8", [5], b"12345")]))


def container(fmt, shape, planes, opts="{}"):
    meta = {"bfp.format": fmt, "bfp.shape": json.dumps(shape), "bfp.name": "t",
            "bfp.version": "0.1.0", "bfp.options": opts, "bfp.layout": "planar-v1"}
    return safetensors([("t." + k, "F32" if k == "tensor_scale" else "U8",
                         [1 if k == "tensor_scale" else len(v)], v) for k, v in planes], meta)


def seeds_container(rng):
    r = lambda n: bytes(rng.randrange(256) for _ in range(n))  # noqa: E731
    put("container", "mxfp4_2x40", container("mxfp4", [2, 40], [("codes", r(40)), ("scales", r(4))]))
    put("container", "nvfp4_1x16", container("nvfp4", [1, 16], [("codes", r(8)), ("scales", r(1)),
                                                                 ("tensor_scale", struct.pack("<f", 2.0))]))
    put("container", "hif4_64", container("hif4", [64], [("codes", r(32)), ("scales", r(4))],
                                          '{"rounding":"nearest_away","seed":"7"}'))
    put("container", "mxfp8p_3d", container("mxfp8_e4m3+", [2, 1, 33], [("codes", r(66)), ("scales", r(4)),
                                                                       ("meta", r(4))]))
    io = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "io_data")
    shutil.copy(os.path.join(io, "py_mxfp4.safetensors"), os.path.join(ROOT, "container", "py_mxfp4"))


def seeds_gguf(rng):
    put("gguf", "demo", gw.demo())
    kvs = [("general.alignment", gw.UINT32, 64), ("a.u8", gw.UINT8, 1), ("a.f64", gw.FLOAT64, 2.5),
           ("a.nested", gw.ARRAY, (gw.ARRAY, [(gw.INT32, [1, 2]), (gw.STRING, ["x"])]))]
    nv = bytes(rng.randrange(256) for _ in range(36))
    put("gguf", "nvfp4_v2", gw.gguf_bytes(kvs, [("n", 40, [64], nv)], alignment=64, version=2))
    put("gguf", "f16_only", gw.gguf_bytes([], [("h", 1, [3, 1], b"\x00\x3c" * 3)]))
    put("gguf", "unknown_type", gw.gguf_bytes([("s", gw.STRING, "v")], [("q8", 8, [32], bytes(34)),
                                                                         ("f", 0, [1], bytes(4))]))


def main():
    rng = random.Random(8)
    for fn in (seeds_dequant, seeds_differential, seeds_verify_layouts, seeds_cli_args,
               seeds_npy, seeds_safetensors, seeds_container, seeds_gguf):
        os.makedirs(os.path.join(ROOT, fn.__name__[len("seeds_"):]), exist_ok=True)
        fn(rng)


if __name__ == "__main__":
    main()
