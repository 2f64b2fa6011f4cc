#!/usr/bin/python3
"""PyTorch CPU peer of `npm run bench:train` (a benchmark peer only, never a runtime dependency).

Reads an HF-style folder written by Arbor (config.json + model.safetensors, parsed by hand so
the `safetensors` package is not needed) and batch.json ({"seqs": [[ids...], ...]}), builds the
same Llama/Qwen-family decoder in plain torch, and runs `--steps` training steps of
forward + backward + AdamW on the mean next-token NLL. Prints one JSON object: the loss at every
step (step 0 = the initial weights) and the wall time of each step.

usage: train_torch.py <folder> --steps N --threads 2 --lr 1e-3 --weight-decay 0.01
       train_torch.py --gemm 1024 --steps N --threads 2   (fp32 N×N×N matmul ceiling: seconds per run)
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F


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
        if meta["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {meta['dtype']}, this reader handles F32 only")
        b, e = meta["data_offsets"]
        t = torch.frombuffer(bytearray(raw[base + b : base + e]), dtype=torch.float32)
        out[name] = t.reshape(meta["shape"]).clone()
    return out


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


class Model:
    def __init__(self, cfg, weights):
        self.c = cfg
        self.w = {k: v.requires_grad_(True) for k, v in weights.items()}
        self.hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]

    def params(self):
        return list(self.w.values())

    def rope(self, T):
        hd = self.hd
        inv = torch.tensor([1.0 / math.pow(self.c["rope_theta"], (2 * i) / hd) for i in range(hd // 2)], dtype=torch.float32)
        freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], -1)
        return emb.cos(), emb.sin()

    @staticmethod
    def rotate(x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin

    def loss(self, ids, targets):
        c, w, hd = self.c, self.w, self.hd
        B, T = ids.shape
        H, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
        eps = c["rms_norm_eps"]
        h = F.embedding(ids, w["model.embed_tokens.weight"])
        cos, sin = self.rope(T)
        mask = torch.full((T, T), -1e9).triu(1)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}"
            x = rms_norm(h, w[f"{p}.input_layernorm.weight"], eps)
            a = f"{p}.self_attn"
            q = F.linear(x, w[f"{a}.q_proj.weight"], w.get(f"{a}.q_proj.bias")).view(B, T, H, hd).transpose(1, 2)
            k = F.linear(x, w[f"{a}.k_proj.weight"], w.get(f"{a}.k_proj.bias")).view(B, T, Hkv, hd).transpose(1, 2)
            v = F.linear(x, w[f"{a}.v_proj.weight"], w.get(f"{a}.v_proj.bias")).view(B, T, Hkv, hd).transpose(1, 2)
            if f"{a}.q_norm.weight" in w:
                q = rms_norm(q, w[f"{a}.q_norm.weight"], eps)
                k = rms_norm(k, w[f"{a}.k_norm.weight"], eps)
            q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
            rep = H // Hkv
            qg = q.reshape(B, Hkv, rep, T, hd)
            scores = qg @ k.transpose(-1, -2).unsqueeze(2) / math.sqrt(hd) + mask
            ctx = scores.softmax(-1) @ v.unsqueeze(2)
            ctx = ctx.reshape(B, H, T, hd).transpose(1, 2).reshape(B, T, H * hd)
            h = h + F.linear(ctx, w[f"{a}.o_proj.weight"])
            x = rms_norm(h, w[f"{p}.post_attention_layernorm.weight"], eps)
            m = f"{p}.mlp"
            h = h + F.linear(F.silu(F.linear(x, w[f"{m}.gate_proj.weight"])) * F.linear(x, w[f"{m}.up_proj.weight"]), w[f"{m}.down_proj.weight"])
        h = rms_norm(h, w["model.norm.weight"], eps)
        head = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings", True) else w["lm_head.weight"]
        logits = h @ head.t()
        return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--gemm", type=int, default=0, help="time an N×N×N fp32 matmul instead of training")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--serve", action="store_true", help="one step per 'step' line on stdin, one JSON line per step on stdout")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.gemm:
        n = a.gemm
        x, y = torch.randn(n, n), torch.randn(n, n)
        for _ in range(3):
            x @ y
        times = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            x @ y
            times.append(time.perf_counter() - t0)
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "gemm": n, "seconds": times}))
        return 0
    if not a.folder:
        ap.error("the model folder is required unless --gemm is given")
    cfg = json.load(open(os.path.join(a.folder, "config.json")))
    model = Model(cfg, read_safetensors(os.path.join(a.folder, "model.safetensors")))
    seqs = json.load(open(os.path.join(a.folder, "batch.json")))["seqs"]
    if len({len(s) for s in seqs}) != 1:
        raise ValueError("batch.json: sequences must share one length (no padding in the benchmark)")
    data = torch.tensor(seqs, dtype=torch.long)
    ids, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    opt = torch.optim.AdamW(model.params(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)
    info = {
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "params": sum(p.numel() for p in model.params()), "tokens_per_step": ids.numel(),
    }

    def step():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model.loss(ids, targets)
        loss.backward()
        opt.step()
        return loss.item(), time.perf_counter() - t0

    if a.serve:
        # Interleaved with the other implementations by the caller, so they share the same
        # background load (the benchmark machine is shared).
        print(json.dumps({"ready": True, **info}), flush=True)
        for line in sys.stdin:
            if line.strip() != "step":
                break
            loss, sec = step()
            print(json.dumps({"loss": loss, "seconds": sec}), flush=True)
        return 0
    losses, times = [], []
    for _ in range(a.steps):
        loss, sec = step()
        losses.append(loss)
        times.append(sec)
    print(json.dumps({**info, "losses": losses, "step_seconds": times}))


if __name__ == "__main__":
    sys.exit(main())
