#!/usr/bin/env python3
"""Write a small sharded Hugging Face style checkpoint for `bfp convert` tests.

usage: make_ckpt.py DIR [--big MIB | --many SHARDS]

Three shards with model.safetensors.index.json, config.json and a tokenizer
file: F32, F16, BF16 and I64 tensors, 1-D and 2-D, an odd shape (7x33), a
block of -0.0 next to +0.0, embeddings, a norm and a head. Safetensors is
written by hand (struct + numpy), so only numpy is needed. With --big, a
one-shard-per-~256-MiB bf16 checkpoint of about MIB mebibytes instead (bench);
with --many, SHARDS shards of 16 MiB of F32 (the interrupted-run test).
"""
import json
import os
import struct
import sys

import numpy as np


def bf16_bits(x):
    """float32 array -> bfloat16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def write_st(path, tensors):
    """tensors: list of (name, dtype string, shape, raw bytes)."""
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape),
                        "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def tensor(rng, name, dt, shape, scale=1.0):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    if dt == "F32":
        raw = x.tobytes()
    elif dt == "F16":
        raw = x.astype(np.float16).tobytes()
    elif dt == "BF16":
        raw = bf16_bits(x).tobytes()
    else:
        raw = np.arange(int(np.prod(shape)), dtype=np.int64).tobytes()
    return (name, dt, shape, raw)


def small(d):
    rng = np.random.default_rng(24)
    L = "model.layers.0."
    q = (rng.standard_normal((64, 64)) * 0.05).astype(np.float32)
    q[0, :32] = 0.0
    q[0, 32:64] = -0.0  # a block of -0.0 beside one of +0.0
    q[1, :] *= 1000.0   # an outlier row
    shards = {
        "model-00001-of-00003.safetensors": [
            tensor(rng, "model.embed_tokens.weight", "BF16", (40, 64)),
            ("model.layers.0.self_attn.q_proj.weight", "BF16", (64, 64),
             bf16_bits(q).tobytes()),
            tensor(rng, L + "self_attn.k_proj.weight", "F16", (32, 64), 0.1),
            tensor(rng, L + "self_attn.q_proj.bias", "F32", (64,)),
            tensor(rng, L + "input_layernorm.weight", "BF16", (64,)),
        ],
        "model-00002-of-00003.safetensors": [
            tensor(rng, L + "mlp.up_proj.weight", "F32", (96, 64), 0.02),
            tensor(rng, L + "mlp.down_proj.weight", "BF16", (64, 96), 0.02),
            tensor(rng, L + "mlp.odd_proj.weight", "BF16", (7, 33)),
            tensor(rng, "model.position_ids", "I64", (1, 8)),
        ],
        "model-00003-of-00003.safetensors": [
            tensor(rng, "model.norm.weight", "F32", (64,)),
            tensor(rng, "lm_head.weight", "BF16", (40, 64)),
            tensor(rng, L + "self_attn.o_proj.weight", "BF16", (64, 64), 0.03),
        ],
    }
    wm = {}
    for fname, ts in shards.items():
        write_st(os.path.join(d, fname), ts)
        for t in ts:
            wm[t[0]] = fname
    total = sum(len(t[3]) for ts in shards.values() for t in ts)
    json.dump({"metadata": {"total_size": total}, "weight_map": wm},
              open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=2)
    json.dump({"model_type": "llama", "hidden_size": 64, "torch_dtype": "bfloat16"},
              open(os.path.join(d, "config.json"), "w"), indent=2)
    open(os.path.join(d, "tokenizer.json"), "w").write('{"version": "1.0"}\n')


def big(d, mib):
    """About mib MiB of bf16 linear weights in 256 MiB shards (4096 x 4096)."""
    rng = np.random.default_rng(1)
    block = bf16_bits(rng.standard_normal((4096, 4096)).astype(np.float32) * 0.02)
    per_tensor = block.nbytes  # 32 MiB
    n = max(1, mib * 1024 * 1024 // per_tensor)
    per_shard = 8
    nshards = (n + per_shard - 1) // per_shard
    wm = {}
    for s in range(nshards):
        fname = f"model-{s + 1:05d}-of-{nshards:05d}.safetensors"
        ts = []
        for i in range(s * per_shard, min(n, (s + 1) * per_shard)):
            name = f"model.layers.{i}.mlp.up_proj.weight"
            ts.append((name, "BF16", (4096, 4096), block.tobytes()))
            wm[name] = fname
        write_st(os.path.join(d, fname), ts)
    json.dump({"metadata": {"total_size": n * per_tensor}, "weight_map": wm},
              open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=2)
    json.dump({"model_type": "llama"}, open(os.path.join(d, "config.json"), "w"))


def many(d, nshards):
    """nshards shards of four 512x2048 F32 weights (4 MiB each)."""
    rng = np.random.default_rng(2)
    wm = {}
    for s in range(nshards):
        fname = f"model-{s + 1:05d}-of-{nshards:05d}.safetensors"
        ts = [tensor(rng, f"model.layers.{4 * s + i}.mlp.up_proj.weight", "F32",
                     (512, 2048)) for i in range(4)]
        write_st(os.path.join(d, fname), ts)
        for t in ts:
            wm[t[0]] = fname
    json.dump({"metadata": {}, "weight_map": wm},
              open(os.path.join(d, "model.safetensors.index.json"), "w"))
    json.dump({"model_type": "llama"}, open(os.path.join(d, "config.json"), "w"))


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 3 and sys.argv[2] == "--big":
        big(out, int(sys.argv[3]))
    elif len(sys.argv) > 3 and sys.argv[2] == "--many":
        many(out, int(sys.argv[3]))
    else:
        small(out)
