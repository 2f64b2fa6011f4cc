#!/usr/bin/python3
"""Writes the parity fixtures under tests/fixtures/models: small random-weight HF folders
(Qwen2, Qwen3, Llama; F32 / F16 / BF16; RoPE scaling llama3, yarn, dynamic, linear; one sharded
folder with an index) and, for each, reference logits from an independent plain-torch forward
(scripts/hf_torch.py, following transformers' modelling and modeling_rope_utils.py).

Each folder gets reference.json ({"input_ids": [[...]], "shape": [B, T, V]}) and
reference.safetensors (tensor "logits", float32 [B, T, V]). F16/BF16 references are computed in
float32 from the stored (rounded) weights, which is what Arbor computes.

usage: /usr/bin/python3 scripts/make_model_fixtures.py [out_dir]   (default tests/fixtures/models)
Run once; the outputs are checked in so the tests need no PyTorch.
"""
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_torch  # noqa: E402


def shapes(cfg):
    D, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, Hkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], hf_torch.head_dim(cfg)
    arch = cfg["architectures"][0]
    s = {"model.embed_tokens.weight": [V, D]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        s[f"{p}.input_layernorm.weight"] = [D]
        s[f"{p}.self_attn.q_proj.weight"] = [H * hd, D]
        s[f"{p}.self_attn.k_proj.weight"] = [Hkv * hd, D]
        s[f"{p}.self_attn.v_proj.weight"] = [Hkv * hd, D]
        if arch == "Qwen2ForCausalLM":
            s[f"{p}.self_attn.q_proj.bias"] = [H * hd]
            s[f"{p}.self_attn.k_proj.bias"] = [Hkv * hd]
            s[f"{p}.self_attn.v_proj.bias"] = [Hkv * hd]
        if arch == "Qwen3ForCausalLM":
            s[f"{p}.self_attn.q_norm.weight"] = [hd]
            s[f"{p}.self_attn.k_norm.weight"] = [hd]
        s[f"{p}.self_attn.o_proj.weight"] = [D, H * hd]
        s[f"{p}.post_attention_layernorm.weight"] = [D]
        s[f"{p}.mlp.gate_proj.weight"] = [F, D]
        s[f"{p}.mlp.up_proj.weight"] = [F, D]
        s[f"{p}.mlp.down_proj.weight"] = [D, F]
    s["model.norm.weight"] = [D]
    if not cfg.get("tie_word_embeddings", False):
        s["lm_head.weight"] = [V, D]
    return s


def random_weights(cfg, gen):
    w = {}
    for name, shape in shapes(cfg).items():
        if name.endswith("norm.weight"):
            t = 1 + 0.2 * torch.randn(shape, generator=gen)
        elif name.endswith(".bias"):
            t = 0.2 * torch.randn(shape, generator=gen)
        elif "q_proj" in name or "k_proj" in name:
            t = 0.6 * torch.randn(shape, generator=gen)  # sharp attention, so positions (RoPE) matter
        else:
            t = 0.25 * torch.randn(shape, generator=gen)
        w[name] = t
    return w


def base_config(arch, **kw):
    model_type = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}[arch]
    c = {
        "architectures": [arch], "model_type": model_type, "vocab_size": 48, "hidden_size": 32, "intermediate_size": 32,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": arch == "Qwen2ForCausalLM", "max_position_embeddings": 256,
        "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "attention_bias": arch == "Qwen2ForCausalLM",
        "transformers_version": "4.57.0",
    }
    c.update(kw)
    return c


FIXTURES = [
    # name, config, dtype, batch, length, shards
    ("qwen2-f32", base_config("Qwen2ForCausalLM"), "float32", 2, 12, 1),
    ("qwen3-bf16", base_config("Qwen3ForCausalLM", num_attention_heads=4, num_key_value_heads=2), "bfloat16", 2, 12, 1),
    ("llama-llama3rope-f16", base_config("LlamaForCausalLM", rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}), "float16", 1, 40, 1),
    ("qwen2-yarn-f32", base_config("Qwen2ForCausalLM", max_position_embeddings=64, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}), "float32", 1, 40, 1),
    ("llama-dynamic-f32", base_config("LlamaForCausalLM", max_position_embeddings=24, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "float32", 1, 40, 1),
    ("llama-linear-bf16", base_config("LlamaForCausalLM", rope_scaling={"type": "linear", "factor": 4.0}), "bfloat16", 1, 24, 1),
    ("llama-sharded-f32", base_config("LlamaForCausalLM", num_hidden_layers=2, eos_token_id=2), "float32", 2, 12, 3),
]


def write_folder(out, name, cfg, dtype, B, T, shards, seed):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    gen = torch.Generator().manual_seed(seed)
    sd = hf_torch.TORCH_NAMES[dtype]
    w = {k: v.to(hf_torch.DTYPES[sd]).float() for k, v in random_weights(cfg, gen).items()}  # as stored
    cfg = dict(cfg, torch_dtype=dtype)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if shards == 1:
        hf_torch.write_safetensors(os.path.join(d, "model.safetensors"), w, sd)
    else:
        names = list(shapes(cfg))
        per = (len(names) + shards - 1) // shards
        weight_map = {}
        total = 0
        for i in range(shards):
            part = names[i * per : (i + 1) * per]
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            hf_torch.write_safetensors(os.path.join(d, fname), {k: w[k] for k in part}, sd)
            for k in part:
                weight_map[k] = fname
                total += w[k].numel() * (4 if sd == "F32" else 2)
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 1, "eos_token_id": [2, 5], "do_sample": True, "temperature": 0.7}, f, indent=2)
    ids = torch.randint(0, cfg["vocab_size"], (B, T), generator=gen)
    with torch.no_grad():
        logits = hf_torch.forward(cfg, w, ids)
    hf_torch.write_safetensors(os.path.join(d, "reference.safetensors"), {"logits": logits}, "F32")
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump({"input_ids": ids.tolist(), "shape": list(logits.shape), "torch": torch.__version__,
                   "made_by": "scripts/make_model_fixtures.py"}, f)
    return logits


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "models")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for i, (name, cfg, dtype, B, T, shards) in enumerate(FIXTURES):
        logits = write_folder(out, name, cfg, dtype, B, T, shards, 1000 + i)
        print(f"{name}: logits {list(logits.shape)}, |logits| mean {logits.abs().mean():.4f}")


if __name__ == "__main__":
    main()
