#!/usr/bin/env python3
"""Batch-invariance study (issue 10): the workload, and the comparison of runs.

  invariance_study.py make OUT.jsonl [--requests N] [--seed S] [--vocab V]
      prompts that make batches differ between runs: groups sharing long prefixes (prefix-cache
      hits in some runs, not in others), skewed lengths up to ~3k tokens (chunked prefill,
      preemption under a small KV pool), half greedy and half seeded sampling.
  invariance_study.py compare BASE.jsonl RUN.jsonl [RUN.jsonl ...] [--markdown]
      for each run: requests, generated tokens, requests that differ and tokens that differ from
      BASE (a token differs from the first position where the two outputs part, to the longer's
      end), one row per run.
"""
import argparse
import json
import random
import sys


def make(args):
    rng = random.Random(args.seed)
    prefixes = [[rng.randrange(args.vocab) for _ in range(rng.choice([64, 300, 1100, 2000]))]
                for _ in range(args.groups)]
    with open(args.out, "w") as f:
        for i in range(args.requests):
            prefix = prefixes[rng.randrange(args.groups)] if rng.random() < 0.7 else []
            # Skewed suffix lengths: most short, a few long (up to ~3k tokens with the prefix).
            suffix_len = int(min(1000, 8 + rng.paretovariate(1.2) * 20))
            ids = prefix + [rng.randrange(args.vocab) for _ in range(suffix_len)]
            ids = ids[:args.max_len - 64]  # room for the longest output
            line = {"id": f"r{i}", "prompt_token_ids": ids, "max_tokens": rng.choice([16, 32, 64]),
                    "ignore_eos": True}
            if i % 2:
                line.update(temperature=0.8, top_k=50, seed=1000 + i)
            f.write(json.dumps(line) + "\n")


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                out[r["id"]] = r.get("token_ids") or []
    return out


def differing_tokens(a, b):
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return max(len(a), len(b)) - k
    return abs(len(a) - len(b))


def compare(args):
    base = load(args.base)
    rows = []
    for path in args.runs:
        run = load(path)
        if set(run) != set(base):
            sys.exit(f"{path}: request ids differ from {args.base}")
        diffs = [differing_tokens(base[k], run[k]) for k in base]
        rows.append((path, len(base), sum(len(v) for v in run.values()),
                     sum(1 for d in diffs if d), sum(diffs)))
    if args.markdown:
        print("| run | requests | generated tokens | differing requests | differing tokens |")
        print("|---|---|---|---|---|")
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        for r in rows:
            print("{}: {} requests, {} tokens, {} requests differ, {} tokens differ".format(*r))
    return 1 if any(r[4] for r in rows) and args.fail_on_diff else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--requests", type=int, default=240)
    m.add_argument("--groups", type=int, default=6)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--vocab", type=int, default=32000)
    m.add_argument("--max-len", type=int, default=2048, help="the model's context length")
    c = sub.add_parser("compare")
    c.add_argument("base")
    c.add_argument("runs", nargs="+")
    c.add_argument("--markdown", action="store_true")
    c.add_argument("--fail-on-diff", action="store_true")
    args = p.parse_args()
    if args.cmd == "make":
        make(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
