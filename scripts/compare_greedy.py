"""Where roseinfer's greedy tokens first diverge from a peer's, request by request.

Usage: python3 compare_greedy.py ROSEINFER_OUT.jsonl PEER.json [--markdown]
ROSEINFER_OUT.jsonl: `roseinfer run ... -o` output (fields id, token_ids, prompt_tokens);
PEER.json: scripts/peer_real_model.py output. Prints one row per request: tokens compared, the
first differing position (or "identical"), and both texts. Exit 0 always: this reports, it does
not judge (the caller decides what divergence is acceptable in bf16).
"""
import json
import sys


def first_divergence(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else n


def main():
    ours = {}
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                ours[rec["id"]] = rec
    peer = json.load(open(sys.argv[2]))["results"]
    markdown = "--markdown" in sys.argv
    if markdown:
        print("| request | prompt tokens (ours/peer) | tokens | first divergence | roseinfer | transformers |")
        print("|---|---|---|---|---|---|")
    same = 0
    for p in peer:
        o = ours.get(p["id"])
        if o is None:
            print(f"{p['id']}: missing from roseinfer's output")
            continue
        div = first_divergence(o["token_ids"], p["output_ids"])
        same += div is None
        where = "identical" if div is None else f"token {div}"
        n = max(len(o["token_ids"]), len(p["output_ids"]))
        if markdown:
            def cell(t):
                return t.replace("|", "\\|").replace("\n", "\\n")[:80]
            print(f"| {p['id']} | {o['prompt_tokens']}/{len(p['prompt_ids'])} | {n} | {where} | "
                  f"{cell(o['text'])} | {cell(p['text'])} |")
        else:
            print(f"{p['id']:12s} prompt {o['prompt_tokens']}/{len(p['prompt_ids'])} "
                  f"tokens {n:3d} {where}")
    print(f"identical: {same} of {len(peer)}")


if __name__ == "__main__":
    main()
