#!/usr/bin/env python3
"""Writes the real SmolLM2-135M-Instruct Q4_1 GGUF as a Hugging Face folder (config.json,
model.safetensors in fp32, tokenizer files), by transformers itself: from_pretrained(gguf_file=)
dequantizes and un-permutes; its state dict and config are written as they are. The weights are then exactly those
transformers used for tests/fixtures/real_model/smollm2-q4_1 (scripts/make_real_model_fixtures.py),
so tests/test_real_model_hf.cpp checks roseinfer's safetensors path against the same reference
logits as its GGUF path.

  python3 scripts/gguf_to_hf_folder.py    # -> $ROSEINFER_MODEL_CACHE/SmolLM2-135M-Instruct-hf

Needs torch, transformers, gguf. The GGUF is looked up in $ROSEINFER_MODEL_CACHE or
~/.cache/roseinfer (`make run` puts it there).
"""
import os

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER = "SmolLM2-135M-Instruct-hf"


def main():
    cache = os.environ.get("ROSEINFER_MODEL_CACHE", os.path.expanduser("~/.cache/roseinfer"))
    out = os.path.join(cache, FOLDER)
    tokenizer = AutoTokenizer.from_pretrained(cache, gguf_file=FILE)
    model = AutoModelForCausalLM.from_pretrained(cache, gguf_file=FILE, dtype=torch.float32)
    # save_pretrained refuses a GGUF-loaded model ("not serializable"), so write the plain fp32
    # state dict and the config ourselves; the tied lm_head is the embedding and is left out.
    os.makedirs(out, exist_ok=True)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()
             if not (model.config.tie_word_embeddings and name == "lm_head.weight")}
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    print(out)


if __name__ == "__main__":
    main()
