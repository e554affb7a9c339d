#!/usr/bin/env python3
"""Makes the tiny model fixtures the C++ tests compare against (tests/fixtures/models/*).

Each fixture is a Hugging Face folder written by transformers' save_pretrained (config.json +
model.safetensors, float32) plus reference.json with what transformers computes in fp32:
  prompts: token id lists crossing 16-token block boundaries (lengths 1, 7, 16, 17, 40)
  last_logits[i]: logits of prompt i's last position
  all_position_logits: logits at every position of the 7-token prompt
  greedy[i]: the next `n_greedy` tokens by argmax with the KV cache (what generate(do_sample=False)
    does), checked against model.generate and with a top-1/top-2 margin large enough that an
    fp32 reimplementation cannot flip them
  rope_inv_freq (Llama family): the model's inverse RoPE frequencies, after any scaling

Usage: python3 scripts/make_model_fixtures.py [tests/fixtures/models]
Needs torch (CPU) and transformers; the tests themselves do not need Python.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

PROMPT_LENGTHS = [1, 7, 16, 17, 40]
ALL_POSITIONS_PROMPT = 1  # index into PROMPT_LENGTHS: the 7-token prompt
N_GREEDY = 10
MIN_MARGIN = 2e-3  # top-1 minus top-2 logit at every greedy step


def randomize_norms_and_biases(model, generator):
    """HF initialises norm weights to 1 and biases to 0, which would hide bugs in applying them."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or ".ln_" in name or name.endswith("ln_f.weight") or \
                    name.endswith("ln_f.bias"):
                if name.endswith("weight"):
                    param.copy_(1.0 + 0.2 * torch.randn(param.shape, generator=generator))
                else:
                    param.copy_(0.1 * torch.randn(param.shape, generator=generator))
            elif name.endswith("bias"):
                param.copy_(0.1 * torch.randn(param.shape, generator=generator))


def greedy_with_margins(model, prompt, n):
    """Greedy continuation with the KV cache; returns tokens and the smallest top-1/top-2 gap."""
    ids = torch.tensor([prompt])
    tokens, margin = [], float("inf")
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        for _ in range(n):
            logits = out.logits[0, -1]
            top2 = torch.topk(logits, 2).values
            margin = min(margin, float(top2[0] - top2[1]))
            token = int(torch.argmax(logits))
            tokens.append(token)
            out = model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values,
                        use_cache=True)
    return tokens, margin


def generate_reference(model, prompt, n):
    """model.generate(do_sample=False) with no early stop, for cross-checking the loop above."""
    config = transformers.GenerationConfig(do_sample=False, max_new_tokens=n, min_new_tokens=n,
                                           eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        ids = torch.tensor([prompt])
        # An explicit mask: otherwise a prompt token equal to pad_token_id would be masked out.
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    return out[0, len(prompt):].tolist()


def floats(tensor):
    return [float(f"{x:.7g}") for x in tensor.tolist()]


def make_fixture(out_dir, name, model_cls, config, seed):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed + 1)
    model = model_cls(config).to(torch.float32).eval()
    randomize_norms_and_biases(model, generator)

    # Prompts: re-rolled until every greedy step has a clear winner.
    for attempt in range(50):
        prompt_gen = torch.Generator().manual_seed(seed * 1000 + attempt)
        prompts = [torch.randint(0, config.vocab_size, (n,), generator=prompt_gen).tolist()
                   for n in PROMPT_LENGTHS]
        results = [greedy_with_margins(model, p, N_GREEDY) for p in prompts]
        if min(m for _, m in results) >= MIN_MARGIN:
            break
    else:
        raise SystemExit(f"{name}: no prompt set with greedy margins >= {MIN_MARGIN}")
    greedy = [tokens for tokens, _ in results]
    # min_new_tokens keeps generate() from stopping at eos by banning it, so an eos among the
    # greedy tokens shows up as a disagreement here rather than as a silently shorter list.
    for prompt, tokens in zip(prompts, greedy):
        if generate_reference(model, prompt, N_GREEDY) != tokens:
            raise SystemExit(f"{name}: the greedy loop disagrees with model.generate: "
                             f"{generate_reference(model, prompt, N_GREEDY)} vs {tokens}")

    with torch.no_grad():
        last_logits = [floats(model(input_ids=torch.tensor([p])).logits[0, -1]) for p in prompts]
        all_positions = model(input_ids=torch.tensor([prompts[ALL_POSITIONS_PROMPT]])).logits[0]

    path = os.path.join(out_dir, name)
    model.save_pretrained(path, safe_serialization=True)
    reference = {
        "model": name,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "dtype": "float32",
        "prompts": prompts,
        "last_logits": last_logits,
        "all_position_prompt": ALL_POSITIONS_PROMPT,
        "all_position_logits": [floats(row) for row in all_positions],
        "greedy": greedy,
        "min_greedy_margin": min(m for _, m in results),
    }
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    if rotary is not None:
        reference["rope_inv_freq"] = floats(rotary.inv_freq)
    with open(os.path.join(path, "reference.json"), "w") as f:
        json.dump(reference, f, separators=(",", ":"))
        f.write("\n")
    # Generation settings are not part of what the loaders read.
    gen_config = os.path.join(path, "generation_config.json")
    if os.path.exists(gen_config):
        os.remove(gen_config)
    sizes = {f: os.path.getsize(os.path.join(path, f)) for f in sorted(os.listdir(path))}
    print(name, sizes, "min margin", reference["min_greedy_margin"])


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/models"
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)  # deterministic reductions

    gpt2 = GPT2Config(vocab_size=1024, n_positions=256, n_embd=64, n_layer=2, n_head=4,
                      activation_function="gelu_new", initializer_range=0.15,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      bos_token_id=1, eos_token_id=2)
    gpt2._attn_implementation = "eager"
    make_fixture(out_dir, "tiny-gpt2", GPT2LMHeadModel, gpt2, seed=11)

    llama = LlamaConfig(vocab_size=1024, hidden_size=64, intermediate_size=128,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=16, max_position_embeddings=256, rms_norm_eps=1e-5,
                        rope_theta=10000.0,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64},
                        tie_word_embeddings=True, initializer_range=0.15,
                        bos_token_id=1, eos_token_id=2)
    llama._attn_implementation = "eager"
    make_fixture(out_dir, "tiny-llama", LlamaForCausalLM, llama, seed=22)

    # A smaller vocabulary: the untied lm_head doubles the embedding bytes.
    qwen2 = Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=1000000.0,
                        tie_word_embeddings=False, initializer_range=0.15,
                        bos_token_id=1, eos_token_id=2)
    qwen2._attn_implementation = "eager"
    make_fixture(out_dir, "tiny-qwen2", Qwen2ForCausalLM, qwen2, seed=33)

    # The 1000-id GPT-2-style tokenizer (scripts/make_tokenizer_fixtures.py) fits the 1024-id
    # vocabularies, so these two folders are complete models for `roseinfer run --model DIR`.
    tok = os.path.join(os.path.dirname(out_dir.rstrip("/")), "tokenizers", "gpt2", "tokenizer.json")
    for name in ("tiny-gpt2", "tiny-llama"):
        shutil.copyfile(tok, os.path.join(out_dir, name, "tokenizer.json"))


if __name__ == "__main__":
    main()
