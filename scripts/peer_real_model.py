"""transformers as the peer on the real model: greedy continuations of chat prompts from a GGUF.

Usage (GPU machine, transformers + torch there, the `gguf` package carried as a wheel):
  python3 peer_real_model.py MODEL.gguf PROMPTS.jsonl --json OUT.json [--dtype bf16|fp32]
        [--device cuda|cpu] [--save-hf DIR]
For each prompt line with `messages`, renders the model's own chat template with
tokenizer.apply_chat_template(add_generation_prompt=True), generates max_tokens greedily with no
early stop at EOS handled by generate (eos stops, as roseinfer does), and writes
{"id", "prompt_ids", "output_ids", "text"} per request. --save-hf writes the GGUF-loaded model as a
Hugging Face folder, so the continuous-batching peer (hf_cb_peer.py) can load it.
"""
import argparse
import json
import os
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("prompts")
    ap.add_argument("--json", required=True)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--save-hf")
    args = ap.parse_args()

    folder, name = os.path.split(os.path.abspath(args.gguf))
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype)
    model = model.to(args.device).eval()
    print(f"loaded {name} in {time.perf_counter() - start:.1f}s", flush=True)
    if args.save_hf:
        # The GGUF quantizer marks the model unserializable, but its weights are already
        # dequantized: drop the marker and save plain safetensors for hf_cb_peer.py.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(args.save_hf)
        tok.save_pretrained(args.save_hf)

    eos = [model.config.eos_token_id] if isinstance(model.config.eos_token_id, int) else (
        model.config.eos_token_id or [])
    results = []
    with open(args.prompts) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for line in lines:
        if "messages" not in line:
            continue
        prompt_ids = tok.apply_chat_template(line["messages"], add_generation_prompt=True,
                                             tokenize=True, return_dict=False)
        if isinstance(prompt_ids, dict) or hasattr(prompt_ids, "input_ids"):
            prompt_ids = prompt_ids["input_ids"]
        ids = torch.tensor([prompt_ids], device=args.device)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=line.get("max_tokens", 16), do_sample=False,
                                 eos_token_id=eos or None, pad_token_id=eos[0] if eos else 0)
        output_ids = out[0, ids.shape[1]:].tolist()
        results.append({"id": line["id"], "prompt_ids": list(prompt_ids), "output_ids": output_ids,
                        "text": tok.decode(output_ids, skip_special_tokens=True)})
        print(f"{line['id']}: {results[-1]['text']!r}", flush=True)
    with open(args.json, "w") as f:
        json.dump({"model": name, "dtype": args.dtype, "device": args.device,
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
