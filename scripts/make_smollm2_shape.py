#!/usr/bin/env python3
"""A randomly initialised checkpoint of SmolLM2-135M's shape (safetensors, bf16), for timing the
real default model's bf16 decode where its GGUF cannot travel (scripts/model_parts.sh stages it in
four calls). Decode time does not depend on the weights' values. Runs on the GPU machine (torch,
transformers); no download.

usage: make_smollm2_shape.py OUTDIR   (writes OUTDIR/smollm2-shape)
"""
import pathlib
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    out = pathlib.Path(sys.argv[1]) / "smollm2-shape"
    # HuggingFaceTB/SmolLM2-135M-Instruct's config.json
    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         head_dim=64, max_position_embeddings=8192, rms_norm_eps=1e-5,
                         rope_theta=100000.0, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out)
    print(f"made {out}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params")


if __name__ == "__main__":
    main()
