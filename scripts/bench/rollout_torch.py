#!/usr/bin/python3
"""PyTorch CPU peer of `npm run bench:rollout` (a benchmark peer only, never a runtime dependency).

Reads an HF-style folder written by Arbor (config.json + model.safetensors) and generates with
plain Llama-form KV-cache decoding in torch: prefill a random prompt [B, prompt] once, then
`new` steps that each feed one token per row, append its keys/values to the cache (torch.cat,
as HF's DynamicCache does) and sample the next token with torch.multinomial from
softmax(logits / T), recording its log-probability and the distribution's entropy (what a
rollout for RL needs, as Arbor's engine records them).

--serve: reads one line per measurement on stdin, `<batch>`, and prints
{"batch": B, "seconds": s, "tokens": B * new} (wall time of prefill + all decode steps).

usage: rollout_torch.py <folder> --threads 2 [--prompt 24 --new 32 --serve]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_torch import read_safetensors, rms_norm  # noqa: E402


class Decoder:
    def __init__(self, cfg, w):
        self.c = cfg
        self.w = w
        self.hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        half = self.hd // 2
        self.inv = torch.tensor([1.0 / math.pow(cfg["rope_theta"], (2 * i) / self.hd) for i in range(half)], dtype=torch.float32)
        self.head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]

    def rope(self, pos):  # pos [T] -> cos/sin [T, hd]
        f = pos.float()[:, None] * self.inv[None, :]
        emb = torch.cat([f, f], -1)
        return emb.cos(), emb.sin()

    @staticmethod
    def rotate(x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin

    def forward(self, ids, past):
        """ids [B, T]; past: list of (k, v) [B, Hkv, P, hd] or None. Returns last logits [B, V], present."""
        c, w, hd = self.c, self.w, self.hd
        B, T = ids.shape
        H, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
        eps = c["rms_norm_eps"]
        P = 0 if past is None else past[0][0].shape[2]
        cos, sin = self.rope(torch.arange(P, P + T))
        mask = None
        if T > 1:
            mask = torch.full((T, P + T), -1e9).triu(P + 1)
        h = F.embedding(ids, w["model.embed_tokens.weight"])
        present = []
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
            if past is not None:
                k = torch.cat([past[i][0], k], 2)
                v = torch.cat([past[i][1], v], 2)
            present.append((k, v))
            rep = H // Hkv
            qg = q.reshape(B, Hkv, rep, T, hd)
            scores = qg @ k.transpose(-1, -2).unsqueeze(2) / math.sqrt(hd)
            if mask is not None:
                scores = scores + mask
            ctx = scores.softmax(-1) @ v.unsqueeze(2)
            ctx = ctx.reshape(B, H, T, hd).transpose(1, 2).reshape(B, T, H * hd)
            h = h + F.linear(ctx, w[f"{a}.o_proj.weight"])
            x = rms_norm(h, w[f"{p}.post_attention_layernorm.weight"], eps)
            m = f"{p}.mlp"
            h = h + F.linear(F.silu(F.linear(x, w[f"{m}.gate_proj.weight"])) * F.linear(x, w[f"{m}.up_proj.weight"]), w[f"{m}.down_proj.weight"])
        last = rms_norm(h[:, -1], w["model.norm.weight"], eps)
        return last @ self.head.t(), present

    def generate(self, prompt, new, temperature, gen):
        toks, lps, ents = [], [], []
        logits, past = self.forward(prompt, None)
        for step in range(new):
            lp = torch.log_softmax(logits / temperature, -1)
            nxt = torch.multinomial(lp.exp(), 1, generator=gen)  # [B, 1]
            toks.append(nxt)
            lps.append(lp.gather(1, nxt))
            ents.append(-(lp.exp() * lp).sum(-1))
            if step + 1 < new:
                logits, past = self.forward(nxt, past)
        return torch.cat(toks, 1), torch.cat(lps, 1), torch.stack(ents, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=24)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = json.load(open(os.path.join(a.folder, "config.json")))
    dec = Decoder(cfg, read_safetensors(os.path.join(a.folder, "model.safetensors")))
    gen = torch.Generator().manual_seed(1)
    V = cfg["vocab_size"]

    def run(B):
        prompt = torch.randint(1, V, (B, a.prompt), generator=gen)
        t0 = time.perf_counter()
        with torch.no_grad():
            toks, _, _ = dec.generate(prompt, a.new, a.temperature, gen)
        sec = time.perf_counter() - t0
        return {"batch": B, "seconds": sec, "tokens": int(toks.numel())}

    info = {"torch": torch.__version__, "threads": torch.get_num_threads(), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
            "params": sum(t.numel() for t in dec.w.values())}
    if a.serve:
        print(json.dumps({"ready": True, **info}), flush=True)
        for line in sys.stdin:
            line = line.strip()
            if not line:
                break
            print(json.dumps(run(int(line))), flush=True)
        return 0
    run(a.batch)  # warm-up
    print(json.dumps({**info, **run(a.batch)}))


if __name__ == "__main__":
    sys.exit(main())
