#!/usr/bin/env python3
"""Turns one scripts/device/bench_device.sh result folder into the markdown tables of results/.

Usage: python3 scripts/results_markdown.py RESULTS_DIR > RESULTS_DIR/README.md
Reads NAME.json (roseinfer bench --json), NAME.cmd (the exact command), peer_*.json (the
transformers peer) and device.txt. llama.cpp's figures and the targets are quoted from
../shared/reference/benchmarks.md (measured there on the same kind of H100); they are not rerun.
"""
import json
import pathlib
import sys

# reference/benchmarks.md: llama.cpp llama-batched-bench, (model, B) -> (prefill tok/s, decode tok/s)
LLAMA_CPP = {
    ("gpt2", 1): (4636, 1289), ("gpt2", 64): (166062, 24209), ("gpt2", 256): (170851, 26404),
    ("llama-1b", 1): (5997, 613), ("llama-1b", 16): (84298, 5984),
    ("llama-1b", 64): (93686, 13324), ("llama-1b", 256): (93486, 17369),
}
LLAMA_CPP_SEED000_S = 0.214
# Targets from reference/benchmarks.md.
TARGET_DECODE = {("gpt2", 1): 3000, ("llama-1b", 1): 1000, ("gpt2", 256): 66000, ("llama-1b", 256): 45000}
TARGET_PREFILL_LLAMA = 190000


def load(d, name):
    p = d / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else None


def cmd(d, name):
    p = d / f"{name}.cmd"
    return p.read_text().strip() if p.exists() else "?"


def fmt(x, digits=0):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def main():
    d = pathlib.Path(sys.argv[1])
    out = []
    w = out.append
    device = (d / "device.txt").read_text().strip().splitlines() if (d / "device.txt").exists() else []
    w(f"# Benchmarks: {d.name}\n")
    w("Device and build, as the run printed them:\n")
    w("```\n" + "\n".join(device) + "\n```\n")
    w("Every roseinfer figure below comes from the JSON file of the same name in this folder; the exact")
    w("command is in NAME.cmd. Presets have synthetic bf16 weights of the real shapes. The transformers")
    w("peer ran in the same device call (../shared/peers/hf_cb_peer.py on the same random shapes);")
    w("llama.cpp's figures are quoted from reference/benchmarks.md (same kind of H100, not rerun).\n")

    w("## grid: B requests x 512 prompt tokens x 128 output tokens (offline)\n")
    w("prefill tok/s = prompt tokens / time of steps with prefill; decode tok/s = tokens of pure-decode")
    w("steps / their time (llama.cpp batched-bench's columns). GB/s: weights + KV read per decode step")
    w("over its time; % floor: of the measured 3.0 TB/s copy bandwidth.\n")
    w("| model | B | prefill tok/s | llama.cpp | decode tok/s | llama.cpp | decode target | decode GB/s | % floor | TTFT p50 ms | TPOT p50 ms |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in ("gpt2", "llama-1b"):
        for b in (1, 16, 64, 256):
            r = load(d, f"grid_{model}_b{b}")
            if not r:
                continue
            run = r["runs"][0]
            lp, ld = LLAMA_CPP.get((model, b), (None, None))
            frac = run.get("bandwidth_floor_fraction")
            w(f"| {model} | {b} | {fmt(run.get('prefill_throughput'))} | {fmt(lp)} | "
              f"{fmt(run.get('decode_throughput'))} | {fmt(ld)} | {fmt(TARGET_DECODE.get((model, b)))} | "
              f"{fmt(run.get('decode_gbps'))} | {fmt(frac * 100 if frac else None, 1)} | "
              f"{fmt(run.get('median_ttft_ms'), 1)} | {fmt(run.get('median_tpot_ms'), 3)} |")
    w("")

    r = load(d, "seed000")
    if r:
        w("## seed000: gpt2, 64 requests sharing one 856-token prompt, 16 output tokens\n")
        w("| mode | prefix cache | duration s | req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | hit rate | prefill tokens computed |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        for run in r["runs"]:
            w(f"| {run['mode']} | {'on' if run['prefix_cache'] else 'off'} | {run['duration']:.4f} | "
              f"{fmt(run['request_throughput'], 1)} | {fmt(run['output_throughput'])} | "
              f"{fmt(run['median_ttft_ms'], 2)} | {fmt(run['p99_ttft_ms'], 2)} | {fmt(run['median_tpot_ms'], 3)} | "
              f"{run['prefix_cache_hit_rate'] * 100:.1f}% | {fmt(run['prefill_tokens_computed'])} |")
        peer = load(d, "peer_seed000")
        w("")
        if peer:
            w(f"transformers peer (same call): {peer['duration_s']:.3f} s, TTFT p50 {peer['p50_ttft_ms']:.1f} ms, "
              f"TPOT p50 {peer['p50_tpot_ms']:.2f} ms. llama.cpp (quoted): {LLAMA_CPP_SEED000_S} s. Target: offline with cache <= 20 ms.\n")
        else:
            w(f"llama.cpp (quoted): {LLAMA_CPP_SEED000_S} s. Target: offline with cache <= 20 ms.\n")

    r = load(d, "nano256")
    if r:
        run = r["runs"][0]
        peer = load(d, "peer_nano256")
        w("## nano256: llama-1b, 256 requests, input and output uniform in [100, 1024], offline\n")
        w("| engine | duration s | output tok/s | total tok/s | TTFT p50 ms | TPOT p50 ms | preemptions |")
        w("|---|---|---|---|---|---|---|")
        w(f"| roseinfer | {run['duration']:.2f} | {fmt(run['output_throughput'])} | {fmt(run['total_token_throughput'])} | "
          f"{fmt(run['median_ttft_ms'], 1)} | {fmt(run['median_tpot_ms'], 2)} | {run['preemptions']:.0f} |")
        if peer:
            w(f"| transformers (same call) | {peer['duration_s']:.2f} | {fmt(peer['output_throughput'])} | "
              f"{fmt(peer['total_token_throughput'])} | {fmt(peer['p50_ttft_ms'], 1)} | {fmt(peer['p50_tpot_ms'], 2)} | - |")
        w("\nTarget: >= 25,000 output tok/s.\n")

    serve = [(rate, load(d, f"serve_rate_{rate}")) for rate in ("inf", "32", "8")]
    if any(r for _, r in serve):
        w("## serve: llama-1b, 500 requests of 550 tokens (330 shared), 150 output tokens, online\n")
        w("| rate req/s | prefix cache | duration s | req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | ITL p99 ms | hit rate |")
        w("|---|---|---|---|---|---|---|---|---|---|---|")
        for rate, r in serve:
            if not r:
                continue
            for run in r["runs"]:
                w(f"| {rate} | {'on' if run['prefix_cache'] else 'off'} | {run['duration']:.2f} | "
                  f"{fmt(run['request_throughput'], 1)} | {fmt(run['output_throughput'])} | "
                  f"{fmt(run['median_ttft_ms'], 1)} | {fmt(run['p99_ttft_ms'], 1)} | "
                  f"{fmt(run['median_tpot_ms'], 2)} | {fmt(run['p99_tpot_ms'], 2)} | {fmt(run['p99_itl_ms'], 2)} | "
                  f"{run['prefix_cache_hit_rate'] * 100:.1f}% |")
        w("")

    w("## Commands\n")
    w("```")
    for p in sorted(d.glob("*.cmd")):
        w(f"{p.stem}: {p.read_text().strip()}")
    w("```")
    print("\n".join(out))


if __name__ == "__main__":
    main()
