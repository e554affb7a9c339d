#!/usr/bin/env python3
"""Reads a ROSEINFER_CUDA_TRACE_FILE dump (a build configured with -DROSEINFER_TRACE_PROBE=ON;
kernels/cuda/trace_probe.cuh: one line a thread block: family, tag,
in, grid, block, smid, entry, waited, ready, exit in ns of %globaltimer) and prints the last
complete decode step as launches: each launch's share of the step (its last block's exit minus
the previous launch's), split into the boundary (previous launch's last exit to this launch's
median wait return), the input preparation (median wait return to median input ready) and the
body (median input ready to last exit); then the sums by kind of launch.

usage: timeline.py TRACE [--names llama-8b] [--all]"""
import gzip
import statistics
import sys
from collections import defaultdict


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            p = line.split()
            fam, tag, inn, grid, block, smid = p[0], int(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5])
            entry, waited, ready, exit_ = map(int, p[6:10])
            rows.append((fam, tag, inn, grid, block, smid, entry, waited, ready, exit_))
    return rows


def launches(rows):
    rows = sorted(rows, key=lambda r: r[7])
    out, cur, cur_exit = [], [], 0
    for r in rows:
        key = (r[0], r[1], r[2], r[3])
        if cur and (key != (cur[0][0], cur[0][1], cur[0][2], cur[0][3]) or r[7] > cur_exit):
            out.append(cur)
            cur, cur_exit = [], 0
        cur.append(r)
        cur_exit = max(cur_exit, r[9])
    if cur:
        out.append(cur)
    return out


def kind(fam, tag, inn):
    if fam == "attention":
        return "attention"
    if fam == "norm":
        return "add_norm"
    if fam == "sample":
        return "sample"
    out, epilogue = tag // 4, tag % 4
    if epilogue == 2:
        return f"gate|up ({inn}->{out})"
    return f"gemv {inn}->{out}"


def main():
    path = sys.argv[1]
    rows = read(path)
    ls = launches(rows)
    # Steps end with the sampling launch; the GEMV family's ring is the shortest, so take the last
    # step whose whole span lies after its first record.
    gemv_start = min(r[6] for r in rows if r[0] == "gemv_quant") if any(
        r[0] == "gemv_quant" for r in rows) else 0
    sample_idx = [i for i, l in enumerate(ls) if l[0][0] == "sample"]
    step = None
    for a, b in zip(sample_idx[::-1][1:], sample_idx[::-1]):
        first = ls[a + 1]
        if min(r[6] for r in first) >= gemv_start:
            step = ls[a + 1:b + 1]
            prev_exit = max(r[9] for r in ls[a])
            break
    if step is None:
        sys.exit("no complete step in the trace")
    total = max(r[9] for r in step[-1]) - prev_exit
    print(f"{path}: last complete step, {len(step)} launches, {total / 1000:.1f} us "
          f"(previous sampling launch's last exit to this one's)")
    sums = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    show_all = "--all" in sys.argv
    if show_all:
        print(f"{'launch':28s} {'blocks':>6s} {'share':>7s} {'bound':>7s} {'prep':>7s} {'body':>7s}"
              f" {'early':>7s}")
    last_exit = prev_exit
    for l in step:
        fam, tag, inn = l[0][0], l[0][1], l[0][2]
        exit_max = max(r[9] for r in l)
        waited = statistics.median(r[7] for r in l)
        ready = statistics.median(r[8] for r in l)
        entry_med = statistics.median(r[6] for r in l)
        share = exit_max - last_exit
        bound = waited - last_exit
        prep = ready - waited
        body = exit_max - ready
        early = last_exit - entry_med  # how long before the previous launch's end its blocks began
        k = kind(fam, tag, inn)
        s = sums[k]
        s[0] += 1
        s[1] += share
        s[2] += bound
        s[3] += prep
        s[4] += body
        if show_all:
            print(f"{k:28s} {len(l):6d} {share / 1000:7.2f} {bound / 1000:7.2f} {prep / 1000:7.2f}"
                  f" {body / 1000:7.2f} {early / 1000:7.2f}")
        last_exit = exit_max
    print(f"{'kind':28s} {'count':>5s} {'share us':>9s} {'/launch':>8s} {'bound':>7s} {'prep':>7s}"
          f" {'body':>7s}  (per launch, us)")
    for k, (n, share, bound, prep, body) in sorted(sums.items(), key=lambda kv: -kv[1][1]):
        print(f"{k:28s} {n:5d} {share / 1000:9.1f} {share / n / 1000:8.2f} {bound / n / 1000:7.2f}"
              f" {prep / n / 1000:7.2f} {body / n / 1000:7.2f}")


if __name__ == "__main__":
    main()
