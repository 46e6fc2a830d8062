#!/usr/bin/env python3
"""Write a checkpoint quantized and compressed by the compressed-tensors
library itself (not by bfp), for tests/cli/test_ct_input.sh.

usage: make_ct_ckpt.py DIR nvfp4|mxfp4|mxfp8_e4m3|mxfp6_e2m3

DIR/orig: the bf16 originals, two shards with model.safetensors.index.json.
DIR/ct:   the same model through compressed-tensors' NVFP4A16, MXFP4A16,
          MXFP8A16 or MXFP6A16 preset (scales from its own calculate_qparams / generate_gparam,
          as llm-compressor's min-max observer computes them, then its
          compress_module), two shards, index and config.json with its
          quantization_config.
DIR/theirs.MODULE.npy: compressed-tensors' decompress_module of each module
          (bf16 values, as float32); nvfp4 also DIR/theirs32.MODULE.npy, its
          dequantize in float32; DIR/orig.MODULE.bin: the original as
          raw float32 (the INPUT of bfp verify).
"""
import json
import os
import sys

import numpy as np
import torch
from compressed_tensors.compressors.base import compress_module, decompress_module
from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
from compressed_tensors.quantization import (QuantizationConfig,
                                             apply_quantization_config,
                                             preset_name_to_scheme)
from compressed_tensors.quantization.lifecycle.forward import dequantize
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
from safetensors.torch import save_file

# module -> (rows, cols, shard); the norm is not quantized
MODULES = {"model.layers.0.mlp.up_proj": (40, 96, 1),
           "model.layers.0.mlp.down_proj": (24, 64, 2)}


def weights():
    g = torch.Generator().manual_seed(24)
    out = {}
    for name, (r, c, _) in MODULES.items():
        w = torch.randn(r, c, generator=g) * torch.logspace(-3, 1, c)
        w[1, :32] = 0.0  # a block of zeros
        w[2, 32:64] *= 1e3  # large values beside small ones
        out[name] = w.to(torch.bfloat16)
    return out


def save_shards(d, tensors, shard_of):
    os.makedirs(d)
    files, index = {}, {}
    for name, t in tensors.items():
        fn = f"model-0000{shard_of(name)}-of-00002.safetensors"
        files.setdefault(fn, {})[name] = t.contiguous()
        index[name] = fn
    for fn, ts in files.items():
        save_file(ts, os.path.join(d, fn), metadata={"format": "pt"})
    json.dump({"metadata": {}, "weight_map": index},
              open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=1)


def main():
    out, fmt = sys.argv[1], sys.argv[2]
    preset, ct_format = {"nvfp4": ("NVFP4A16", "nvfp4-pack-quantized"),
                         "mxfp4": ("MXFP4A16", "mxfp4-pack-quantized"),
                         "mxfp8_e4m3": ("MXFP8A16", "mxfp8-quantized"),
                         "mxfp6_e2m3": ("MXFP6A16", "mxfp6-pack-quantized")}[fmt]
    w = weights()
    norm = torch.ones(96, dtype=torch.bfloat16)
    module_of = lambda n: n.rsplit(".", 1)[0]
    shard_of = lambda n: MODULES.get(module_of(n), (0, 0, 1))[2]
    save_shards(os.path.join(out, "orig"),
                {**{m + ".weight": t for m, t in w.items()},
                 "model.norm.weight": norm}, shard_of)

    root = torch.nn.Module()
    for name, (r, c, _) in MODULES.items():
        m = root
        for p in name.split(".")[:-1]:
            if not hasattr(m, p):
                m.add_module(p, torch.nn.Module())
            m = getattr(m, p)
        lin = torch.nn.Linear(c, r, bias=False, dtype=torch.bfloat16)
        lin.weight.data.copy_(w[name])
        m.add_module(name.split(".")[-1], lin)
    scheme = preset_name_to_scheme(preset, ["Linear"])
    qc = QuantizationConfig(config_groups={"group_0": scheme}, format=ct_format,
                            quantization_status="compressed")
    apply_quantization_config(root, qc, show_progress=False)
    args = scheme.weights
    for name in MODULES:
        m = root.get_submodule(name)
        x = m.weight.detach().float()
        groups = x.reshape(x.shape[0], -1, args.group_size)
        gs = None
        if hasattr(m, "weight_global_scale"):
            gs = generate_gparam(x.min(), x.max())
            m.weight_global_scale.data.copy_(gs)
        scale, _ = calculate_qparams(groups.amin(-1), groups.amax(-1), args, global_scale=gs)
        m.weight_scale.data.copy_(scale)
        compress_module(m)
    state = dict(root.state_dict())
    state["model.norm.weight"] = norm
    save_shards(os.path.join(out, "ct"), state, shard_of)
    json.dump({"model_type": "llama", "quantization_config": qc.model_dump(mode="json")},
              open(os.path.join(out, "ct", "config.json"), "w"), indent=1)

    for name in MODULES:
        m = root.get_submodule(name)
        if fmt == "nvfp4":  # its own decoding in float32 too (bf16 rounds the values)
            r, c = m.weight_packed.shape
            y = dequantize(x_q=unpack_fp4_from_uint8(m.weight_packed, r, 2 * c, dtype=torch.float32),
                           scale=m.weight_scale.to(torch.float32), args=args,
                           global_scale=m.weight_global_scale, dtype=torch.float32)
            np.save(os.path.join(out, f"theirs32.{name}.npy"), y.detach().numpy())
        decompress_module(m)
        np.save(os.path.join(out, f"theirs.{name}.npy"), m.weight.detach().float().numpy())
        w[name].float().numpy().tofile(os.path.join(out, f"orig.{name}.bin"))


if __name__ == "__main__":
    main()
