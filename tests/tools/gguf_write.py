#!/usr/bin/env python3
"""A tiny GGUF (v3, little-endian) writer for tests and fuzz seeds.

    gguf_bytes(kvs, tensors, alignment=32, version=3) -> bytes
kvs: list of (key, type_id, value), value encoded by encode_value();
tensors: list of (name, ggml_type, ne, data_bytes), ne in ggml order
(ne[0] the contiguous axis).

Command line: gguf_write.py OUT.gguf demo  writes a small model file with an
F32 tensor "w" (2x64, values 0.25*i - 8), a BF16 tensor "b" (64), and an MXFP4
tensor "q" (2x64) whose ggml blocks hold scale 127 (2^0) and codes i % 16.
"""
import struct
import sys

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
          FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}


def gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def encode_value(t, v):
    if t == STRING:
        return gguf_string(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(encode_value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf_bytes(kvs, tensors, alignment=32, version=3):
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for key, t, v in kvs:
        out += gguf_string(key) + struct.pack("<I", t) + encode_value(t, v)
    off = 0
    offsets = []
    for name, gtype, ne, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gtype, off)
        offsets.append(off)
        off += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for _, _, _, data in tensors:
        out += data + b"\0" * (-len(data) % alignment)
    return bytes(out)


def demo():
    w = struct.pack("<128f", *[0.25 * i - 8 for i in range(128)])
    b = b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", 0.5 * i))[0])[2:] for i in range(64))
    blocks = b""
    for _ in range(2 * 64 // 32):
        blocks += bytes([127]) + bytes((j % 16) | ((j % 16) << 4) for j in range(16))  # j, j+16
    kvs = [("general.architecture", STRING, "demo"), ("general.alignment", UINT32, 32),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "bb"]))]
    return gguf_bytes(kvs, [("w", 0, [64, 2], w), ("b", 30, [64], b), ("q", 39, [64, 2], blocks)])


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] != "demo":
        sys.exit("usage: gguf_write.py OUT.gguf demo")
    with open(sys.argv[1], "wb") as f:
        f.write(demo())
