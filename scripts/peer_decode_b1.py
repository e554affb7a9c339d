"""transformers' batch-1 greedy decode speed on a GGUF model, the peer figure beside roseinfer's
grid B=1 (issue 12). The GGUF is loaded through transformers' own GGUF reader (dequantized to the
given dtype: transformers has no kernel on ggml blocks), with the static KV cache and
torch.compile off (its default generate path), and timed as the grid workload does: one prompt of
PP random token ids, TG greedy tokens, decode tok/s = (TG - 1) / (end - first token).

Usage: python3 peer_decode_b1.py MODEL.gguf|HF_FOLDER [--pp 512] [--tg 128] [--dtype bf16] [--json OUT]
(a folder: a transformers checkpoint, e.g. the random models of ../shared/peers/make_models.py)
"""
import argparse, json, os, random, time

import torch
from transformers import AutoModelForCausalLM


class FirstTokenClock:
    """A streamer that records when the first generated token arrives."""

    def __init__(self):
        self.calls = 0
        self.first = None

    def put(self, value):
        self.calls += 1
        if self.calls == 2 and self.first is None:  # call 1 is the prompt itself
            torch.cuda.synchronize()
            self.first = time.perf_counter()

    def end(self):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--json")
    args = ap.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    if os.path.isdir(args.gguf):
        model = AutoModelForCausalLM.from_pretrained(args.gguf, dtype=dtype).cuda().eval()
    else:
        folder, name = os.path.split(os.path.abspath(args.gguf))
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype).cuda().eval()
    rng = random.Random(0)
    prompt = torch.tensor([[rng.randint(0, 10000) for _ in range(args.pp)]], device="cuda")
    runs = []
    for attempt in range(3):  # the first is warm-up
        clock = FirstTokenClock()
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate(prompt, max_new_tokens=args.tg, min_new_tokens=args.tg, do_sample=False,
                             streamer=clock, pad_token_id=0)
        torch.cuda.synchronize()
        end = time.perf_counter()
        generated = out.shape[1] - args.pp
        decode = (generated - 1) / (end - clock.first)
        runs.append({"ttft_s": clock.first - start, "decode_tok_s": decode, "generated": generated})
        print(f"run {attempt}: ttft {1e3 * (clock.first - start):.1f} ms, decode {decode:.1f} tok/s "
              f"({generated} tokens)", flush=True)
    best = max(r["decode_tok_s"] for r in runs[1:])
    result = {"peer": "transformers " + __import__("transformers").__version__,
              "torch": torch.__version__, "model": args.gguf, "dtype": args.dtype,
              "pp": args.pp, "tg": args.tg, "runs": runs, "decode_tok_s_best": best,
              "device": torch.cuda.get_device_name()}
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
