#!/usr/bin/env python3
"""Per-kernel time of an ncu --csv run (gpu__time_duration.sum), grouped by kernel and grid.

usage: ncu_summary.py FILE.csv [TOP]   (prints the TOP groups by total time and the sum)
"""
import csv
import sys
from collections import defaultdict


def main() -> None:
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    groups = defaultdict(lambda: [0, 0.0])
    total = 0.0
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        us = value / 1e3 if unit in ("ns", "nsecond") else value * 1e3 if unit in ("ms", "msecond") else value
        name = row["Kernel Name"].split("(")[0].replace("void ", "")[:48]
        key = (name, row.get("Grid Size", ""), row.get("Block Size", ""))
        groups[key][0] += 1
        groups[key][1] += us
        total += us
    print(f"{path}: {sum(g[0] for g in groups.values())} kernels, {total:.1f} us")
    for (name, grid, block), (count, us) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {us:9.1f} us {count:4d}x {us / count:7.2f} us  {name} grid{grid} block{block}")


if __name__ == "__main__":
    main()
