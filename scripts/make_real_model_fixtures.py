#!/usr/bin/env python3
"""Writes tests/fixtures/real_model/smollm2-q4_1/: transformers' fp32 reference for the real
SmolLM2-135M-Instruct Q4_1 GGUF, loaded by transformers itself (gguf_file=, which dequantizes with
the gguf package and undoes llama's q/k permutation on its own). tests/test_real_model.cpp runs
roseinfer's CPU backend on the same file and compares.

  reference.json   prompts (token ids; plain text and ChatML chat prompts), greedy continuations
                   (40 tokens, no stopping) with the smallest top-1/top-2 logit gap seen, and the
                   perplexity of pride_and_prejudice.txt (Jane Austen, 1813, public domain)
  last_logits.bin  float32 little-endian [num_prompts, vocab]: logits at each prompt's last position

Needs torch, transformers, gguf, numpy. Run from the repository root. The model file is looked up
in $ROSEINFER_MODEL_CACHE or ~/.cache/roseinfer.
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = "tests/fixtures/real_model/smollm2-q4_1"
TEXT = "tests/fixtures/real_model/pride_and_prejudice.txt"
GREEDY_TOKENS = 40
PLAIN = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
]
CHATS = [
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "Give me three tips for staying healthy."}],
    [{"role": "system", "content": "You are a concise poet."},
     {"role": "user", "content": "Write a short poem about the sea."}],
]


def chatml(messages):
    """The SmolLM2 template (ChatML) with a generation prompt, for conversations that carry a
    system message (the template only adds its default system text when there is none)."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def main():
    cache = os.environ.get("ROSEINFER_MODEL_CACHE", os.path.expanduser("~/.cache/roseinfer"))
    torch.manual_seed(0)
    torch.set_num_threads(1)  # OpenMP spinning across threads is slow on a busy machine
    tokenizer = AutoTokenizer.from_pretrained(cache, gguf_file=FILE)
    model = AutoModelForCausalLM.from_pretrained(cache, gguf_file=FILE, dtype=torch.float32)
    model.eval()
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]

    # The reference notes' vector for [system "You are a helpful assistant.", user "Hello!"].
    check = encode(chatml([{"role": "system", "content": "You are a helpful assistant."},
                           {"role": "user", "content": "Hello!"}]))
    assert check == [1, 9690, 198, 2683, 359, 253, 5356, 11173, 30, 2, 198, 1, 4093, 198,
                     19556, 17, 2, 198, 1, 520, 9531, 198], check

    prompts = [encode(p) for p in PLAIN] + [encode(chatml(c)) for c in CHATS]
    last_logits, greedy, min_gaps = [], [], []
    with torch.no_grad():
        for ids in prompts:
            out, min_gap = [], float("inf")
            past, step_input = None, torch.tensor([ids])
            for step in range(GREEDY_TOKENS):
                result = model(step_input, past_key_values=past, use_cache=True)
                past = result.past_key_values
                logits = result.logits[0, -1].float()
                if step == 0:
                    last_logits.append(logits.numpy().astype("<f4"))
                top2 = torch.topk(logits, 2).values
                min_gap = min(min_gap, float(top2[0] - top2[1]))
                token = int(torch.argmax(logits))
                out.append(token)
                step_input = torch.tensor([[token]])
            greedy.append(out)
            min_gaps.append(min_gap)
            print(repr(tokenizer.decode(out)), f"min gap {min_gap:.4f}", file=sys.stderr)

        text_ids = encode(open(TEXT, encoding="utf-8").read())
        logits = model(torch.tensor([text_ids])).logits[0].double()
        logprobs = torch.log_softmax(logits[:-1], dim=-1)
        nll = -logprobs.gather(1, torch.tensor(text_ids[1:])[:, None]).mean()
        perplexity = float(torch.exp(nll))
    print(f"perplexity {perplexity:.4f} over {len(text_ids)} tokens", file=sys.stderr)

    os.makedirs(OUT, exist_ok=True)
    np.stack(last_logits).tofile(os.path.join(OUT, "last_logits.bin"))
    reference = {
        "model_file": FILE,
        "vocab_size": int(last_logits[0].shape[0]),
        "prompts": prompts,
        "prompt_texts": PLAIN + [chatml(c) for c in CHATS],
        "greedy": greedy,
        "greedy_min_top2_gap": min_gaps,
        "text_token_ids": text_ids,
        "text_perplexity": perplexity,
    }
    with open(os.path.join(OUT, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
