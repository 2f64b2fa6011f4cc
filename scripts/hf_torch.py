"""Plain-torch reference for Hugging Face Llama / Qwen2 / Qwen3 folders (reference numbers and
benchmark peers only, never a runtime dependency; transformers is not installed here).

The forward pass follows transformers' eager modelling (modeling_llama / qwen2 / qwen3) and its
RoPE code (modeling_rope_utils.py: default, linear, dynamic, yarn, llama3), computing in float32
whatever dtype the weights are stored in. safetensors files are read and written by hand
(F32 / F16 / BF16), so the `safetensors` package is not needed.
"""
import json
import math
import os
import struct

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
TORCH_NAMES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        b, e = meta["data_offsets"]
        dt = DTYPES[meta["dtype"]]
        t = torch.frombuffer(bytearray(raw[base + b : base + e]), dtype=dt)
        out[name] = t.reshape(meta["shape"]).clone()
    return out


def write_safetensors(path, tensors, dtype="F32"):
    """tensors: name -> torch tensor (any float dtype); written as `dtype`, names sorted."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(DTYPES[dtype]).contiguous()
        b = t.view(torch.int16).numpy().tobytes() if dtype != "F32" else t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hs = json.dumps(header, separators=(",", ":"))
    hs += " " * ((8 - len(hs) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hs)))
        f.write(hs.encode())
        for b in blobs:
            f.write(b)


def load_folder(folder):
    """(config dict, float32 weights) of an HF folder, single file or sharded."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    single = os.path.join(folder, "model.safetensors")
    w = {}
    if os.path.exists(single):
        w = read_safetensors(single)
    else:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            idx = json.load(f)
        for shard in sorted(set(idx["weight_map"].values())):
            w.update(read_safetensors(os.path.join(folder, shard)))
    return cfg, {k: v.float() for k, v in w.items()}


# ---- RoPE, as transformers' modeling_rope_utils.py ----

def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def default_inv_freq(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rope_params(cfg, seq_len=None):
    """(inv_freq float32 [dim/2], attention_factor) for the config and, for dynamic, the sequence length."""
    base = cfg.get("rope_theta", 10000.0)
    dim = head_dim(cfg)
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return default_inv_freq(base, dim), 1.0
    factor = rs["factor"]
    if kind == "linear":
        return default_inv_freq(base, dim) / factor, 1.0
    if kind == "dynamic":
        max_pos = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
        seq_len = seq_len if seq_len is not None and seq_len > max_pos else max_pos
        base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
        return default_inv_freq(base, dim), 1.0
    if kind == "llama3":
        inv_freq = default_inv_freq(base, dim)
        low, high = rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wl, high_wl = old / low, old / high
        wavelen = 2 * math.pi / inv_freq
        inv_llama = torch.where(wavelen > low_wl, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
        medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
        return torch.where(medium, smoothed, inv_llama), 1.0
    if kind == "yarn":
        orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
        att = rs.get("attention_factor")
        mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")

        def get_mscale(scale, m=1):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        if att is None:
            att = get_mscale(factor, mscale) / get_mscale(factor, mscale_all) if mscale and mscale_all else get_mscale(factor)
        beta_fast = rs.get("beta_fast") or 32
        beta_slow = rs.get("beta_slow") or 1

        def corr_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

        lo, hi = corr_dim(beta_fast), corr_dim(beta_slow)
        if rs.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        extra = 1.0 / pos_freqs
        inter = 1.0 / (factor * pos_freqs)
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
        extra_factor = 1 - ramp
        return inter * (1 - extra_factor) + extra * extra_factor, float(att)
    raise ValueError(f"rope type {kind} not implemented in the reference")


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(cfg, w, ids, position_ids=None, lora=None):
    """Logits [B, T, V] (float32) of a causal forward over `ids` [B, T] (no padding)."""
    return forward_cached(cfg, w, ids, None, position_ids, lora=lora)[0]


def forward_cached(cfg, w, ids, past, position_ids=None, last_only=False, lora=None):
    """(logits, present): a causal forward over new tokens `ids` [B, T] after `past` (per layer
    (k, v) [B, Hkv, P, hd], or None), as transformers' forward with a DynamicCache. `lora`:
    {module name: (A [r, in], B [out, r], scale)} adds scale·x·Aᵀ·Bᵀ to those linear layers (PEFT's LoRA)."""
    B, T = ids.shape
    P = past[0][0].shape[2] if past else 0
    arch = cfg["architectures"][0]
    H, Hkv, hd = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"]), head_dim(cfg)
    eps = cfg.get("rms_norm_eps", 1e-6)
    if position_ids is None:
        position_ids = torch.arange(P, P + T)[None, :].expand(B, T)
    inv_freq, att = rope_params(cfg, int(position_ids.max()) + 1)
    freqs = (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * att)[:, None], (emb.sin() * att)[:, None]
    h = w["model.embed_tokens.weight"][ids]
    mask = torch.full((T, P + T), float("-inf")).triu(P + 1)
    present = []
    def lin(x, n):
        y = x @ w[n + ".weight"].T + (w[n + ".bias"] if n + ".bias" in w else 0)
        if lora and n in lora:
            a, b, scale = lora[n]
            y = y + (x @ a.T) @ b.T * scale
        return y

    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        x = rms_norm(h, w[f"{p}.input_layernorm.weight"], eps)
        q = lin(x, f"{p}.self_attn.q_proj").view(B, T, H, hd)
        k = lin(x, f"{p}.self_attn.k_proj").view(B, T, Hkv, hd)
        v = lin(x, f"{p}.self_attn.v_proj").view(B, T, Hkv, hd).transpose(1, 2)
        if arch == "Qwen3ForCausalLM":
            q = rms_norm(q, w[f"{p}.self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[f"{p}.self_attn.k_norm.weight"], eps)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past:
            k = torch.cat([past[i][0], k], dim=2)
            v = torch.cat([past[i][1], v], dim=2)
        present.append((k, v))
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
        a = torch.softmax(q @ k.transpose(2, 3) * hd**-0.5 + mask, dim=-1, dtype=torch.float32)
        o = (a @ v).transpose(1, 2).reshape(B, T, H * hd)
        h = h + lin(o, f"{p}.self_attn.o_proj")
        x = rms_norm(h, w[f"{p}.post_attention_layernorm.weight"], eps)
        g = lin(x, f"{p}.mlp.gate_proj")
        h = h + lin(torch.nn.functional.silu(g) * lin(x, f"{p}.mlp.up_proj"), f"{p}.mlp.down_proj")
    if last_only:
        h = h[:, -1:]
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return h @ head.T, present
