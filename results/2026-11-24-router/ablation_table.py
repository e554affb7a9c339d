# The ablation table (README): one row per cell x step x router; CPU numbers are medians of the
# rounds. Usage: python3 results/2026-11-24-router/ablation_table.py results/2026-11-24-router/ablation
import glob, json, os, statistics, sys
out = sys.argv[1]
steps = ["main-1283109", "pending-8ebc711", "maxqueue-49343a8", "bound-a91571c", "bound-a91571c-lf0"]
runs = {}
for path in glob.glob(f"{out}/*.json"):
    cell, step, policy = os.path.basename(path)[:-5].split("__")
    runs.setdefault((cell.split(".r")[0], step, policy), []).append(json.load(open(path))["runs"][0])
print("| cell | step | router | hit delivered | TTFT p50 (ms) | TTFT mean (ms) | TTFT p99 (ms) | output tok/s | imbalance | prefill tokens computed |")
print("|---|---|---|---|---|---|---|---|---|---|")
for cell in ["sim16-prefix-groups", "sim64-prefix-groups", "sim3-pg-online-600", "cpu-prefix-groups"]:
    for step in steps:
        for policy in ["prefix", "precise"]:
            rs = runs.get((cell, step, policy))
            if not rs:
                continue
            m = lambda k: statistics.median(r[k] for r in rs)
            print(f"| {cell} | {step} | {policy} | {m('routing_delivered_hit_rate'):.1%} | "
                  f"{m('median_ttft_ms'):.1f} | {m('mean_ttft_ms'):.1f} | {m('p99_ttft_ms'):.1f} | "
                  f"{m('output_throughput'):.0f} | {m('request_imbalance'):.2f} | "
                  f"{m('prefill_tokens_computed'):.0f} |")
