#!/usr/bin/python3
"""Writes an independent PEFT-format LoRA fixture for Arbor's adapter loader: a LoRA adapter on
tests/fixtures/models/qwen2-f32 laid out as PEFT's `save_pretrained` writes it
(adapter_config.json with LoraConfig's fields; adapter_model.safetensors with
`base_model.model.model.layers.N.<module>.lora_A.weight` [r, in] and `lora_B.weight` [out, r]),
and reference logits of base + adapter from the plain-torch forward (scripts/hf_torch.py) with
PEFT's LoRA arithmetic: each adapted Linear's weight gets B @ A * (lora_alpha / r) (PEFT's
get_delta_weight; the unmerged forward x·Wᵀ + scaling·(x·Aᵀ)·Bᵀ is the same sum).

B is random (not PEFT's zero init) so the adapter changes the logits.

usage: /usr/bin/python3 scripts/make_lora_fixture.py   (writes tests/engine/model/fixtures/qwen2-f32-peft-lora)
Run once; the outputs are checked in so the tests need no PyTorch.
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen2-f32")
OUT = os.path.join(ROOT, "tests", "engine", "model", "fixtures", "qwen2-f32-peft-lora")
R, ALPHA = 4, 8
TARGETS = ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]


def main():
    cfg, w = hf_torch.load_folder(BASE)
    torch.manual_seed(0)
    adapters = {}
    merged = dict(w)
    for i in range(cfg["num_hidden_layers"]):
        for t in TARGETS:
            mod = f"model.layers.{i}.{'mlp' if t in ('gate_proj', 'up_proj', 'down_proj') else 'self_attn'}.{t}"
            W = w[f"{mod}.weight"]
            out_f, in_f = W.shape
            bound = 1 / math.sqrt(in_f)
            A = (torch.rand(R, in_f) * 2 - 1) * bound
            B = torch.randn(out_f, R) * 0.1
            adapters[f"base_model.model.{mod}.lora_A.weight"] = A
            adapters[f"base_model.model.{mod}.lora_B.weight"] = B
            merged[f"{mod}.weight"] = W + (B @ A) * (ALPHA / R)
    os.makedirs(OUT, exist_ok=True)
    hf_torch.write_safetensors(os.path.join(OUT, "adapter_model.safetensors"), adapters)
    config = {
        "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "../../../../fixtures/models/qwen2-f32",
        "bias": "none", "corda_config": None, "eva_config": None, "exclude_modules": None, "fan_in_fan_out": False,
        "inference_mode": True, "init_lora_weights": True, "layer_replication": None, "layers_pattern": None,
        "layers_to_transform": None, "loftq_config": {}, "lora_alpha": ALPHA, "lora_bias": False, "lora_dropout": 0.05,
        "megatron_config": None, "megatron_core": "megatron.core", "modules_to_save": None, "peft_type": "LORA",
        "r": R, "rank_pattern": {}, "revision": None, "target_modules": sorted(TARGETS), "task_type": "CAUSAL_LM",
        "use_dora": False, "use_rslora": False,
    }
    with open(os.path.join(OUT, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(BASE, "reference.json")) as f:
        ids = json.load(f)["input_ids"]
    logits = hf_torch.forward(cfg, merged, torch.tensor(ids))
    hf_torch.write_safetensors(os.path.join(OUT, "reference.safetensors"), {"logits": logits})
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump({"input_ids": ids, "shape": list(logits.shape), "torch": torch.__version__, "made_by": "scripts/make_lora_fixture.py"}, f)
    print(f"wrote {OUT}: {len(adapters)} tensors, logits {list(logits.shape)}")


if __name__ == "__main__":
    main()
