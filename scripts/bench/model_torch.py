#!/usr/bin/python3
"""PyTorch CPU peer of `npm run bench:model` (a benchmark peer only, never a runtime dependency).

Loads the HF folder bench:model wrote (scripts/hf_torch.py: transformers' eager forward in plain
torch, weights upcast to float32 as Arbor does) and measures, in this order, printing one JSON
object: load seconds, prefill (batch 1, --prefill lengths, no grad) seconds, KV-cache decode
(batch 1 and 8: prefill 32 tokens, then --steps single-token steps) seconds, one training step
(forward + backward of the mean next-token NLL, batch 1 × 128; no optimizer update) seconds, and
the peak RSS after each phase. The last-position logits of the first prefill are written to
--logits (float32) so bench:model can compare them with Arbor's.

usage: model_torch.py <folder> [--threads 2] [--prefill 128,512] [--steps 16] [--no-train] [--logits file]
"""
import argparse
import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hf_torch  # noqa: E402


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prompt(vocab, B, T, salt=0):
    """The same deterministic ids as bench:model: (i·7919 + 13 + 101·row + salt) mod vocab."""
    return torch.tensor([[(i * 7919 + 13 + 101 * b + salt) % vocab for i in range(T)] for b in range(B)])


def lora_step(cfg, w, rank, B, T):
    """One LoRA step as PEFT trains it: rank-`rank` adapters (alpha 32) on every linear layer of every
    block, base frozen; forward + backward of the mean NLL on B × T tokens, then AdamW on the adapters."""
    gen = torch.Generator().manual_seed(0)
    lora = {}
    for name, t in w.items():
        if name.endswith("_proj.weight"):
            out_f, in_f = t.shape
            a = (torch.randn(rank, in_f, generator=gen) / in_f**0.5).requires_grad_(True)
            b = torch.zeros(out_f, rank).requires_grad_(True)
            lora[name[: -len(".weight")]] = (a, b, 32 / rank)
    params = [p for a, b, _ in lora.values() for p in (a, b)]
    opt = torch.optim.AdamW(params, lr=1e-4)
    V = cfg["vocab_size"]
    ids = prompt(V, B, T + 1, salt=7)
    res = {}
    for k in ("warm", "timed"):
        t0 = time.perf_counter()
        logits = forward(cfg, w, ids[:, :-1], lora)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1))
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        opt.zero_grad()
        t2 = time.perf_counter()
        del logits, loss
        if k == "timed":
            res = {"lora_grad_s": t1 - t0, "lora_opt_s": t2 - t1, "lora_trainable": sum(p.numel() for p in params)}
    res["rss_lora_mb"] = rss_mb()
    return res


def forward(cfg, w, ids, lora):
    return hf_torch.forward(cfg, w, ids, lora=lora)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", default="128,512")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--logits")
    ap.add_argument("--lora-only", action="store_true", help="only load and run the LoRA step")
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--lora-batch", default="4x512")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = {"torch": torch.__version__, "threads": a.threads}
    t0 = time.perf_counter()
    cfg, w = hf_torch.load_folder(a.folder)
    out["load_s"] = time.perf_counter() - t0
    out["rss_load_mb"] = rss_mb()
    V = cfg["vocab_size"]
    if a.lora_only:
        out.update(lora_step(cfg, w, a.lora_rank, *[int(x) for x in a.lora_batch.split("x")]))
        print(json.dumps(out))
        return
    with torch.no_grad():
        hf_torch.forward_cached(cfg, w, prompt(V, 1, 16), None, last_only=True)  # warm-up
        out["prefill"] = {}
        for i, T in enumerate(int(x) for x in a.prefill.split(",")):
            ids = prompt(V, 1, T)
            t0 = time.perf_counter()
            logits, _ = hf_torch.forward_cached(cfg, w, ids, None, last_only=True)
            out["prefill"][str(T)] = time.perf_counter() - t0
            if i == 0 and a.logits:
                logits[0, -1].contiguous().numpy().astype("float32").tofile(a.logits)
        out["rss_prefill_mb"] = rss_mb()
        out["decode"] = {}
        for B in (1, 8):
            logits, past = hf_torch.forward_cached(cfg, w, prompt(V, B, 32), None, last_only=True)
            t0 = time.perf_counter()
            for _ in range(a.steps):
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                logits, past = hf_torch.forward_cached(cfg, w, nxt, past, last_only=True)
            out["decode"][str(B)] = time.perf_counter() - t0
        out["rss_decode_mb"] = rss_mb()
    if not a.no_train:
        params = [v.requires_grad_(True) for v in w.values()]
        ids = prompt(V, 1, 129)
        t0 = time.perf_counter()
        logits = hf_torch.forward(cfg, w, ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1))
        loss.backward()
        out["train_s"] = time.perf_counter() - t0
        out["train_loss"] = loss.item()
        out["rss_train_mb"] = rss_mb()
        del params
    print(json.dumps(out))


if __name__ == "__main__":
    main()
