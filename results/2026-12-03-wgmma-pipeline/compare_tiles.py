"""Tabulates call2's two timing-driver runs (pipeline on / off): per product, the chosen tile's
time and each wgmma tile's time, on / off (us). Usage: python3 compare_tiles.py call2"""
import re
import sys

TILES = ["wgmma 32x8w n64", "wgmma 32x8w n128", "wgmma 16x8w n256", "wgmma 16x8w n128"]


def parse(path):
    rows, model = {}, None
    for line in open(path):
        m = re.match(r"(llama-\w+): us per product", line)
        if m:
            model = m.group(1)
            continue
        f = line.split()
        if len(f) > 20 and f[1] in ("Q4_K", "Q8_0", "Q4_0", "Q6_K", "Q4_1") and f[2].isdigit():
            per_tile = f[-11:]  # the eleven compiled shapes, kShapes' order
            rows[(model, f[0], f[1], int(f[2]))] = (f[3], f[6], per_tile[-4:])
    return rows


on, off = parse(f"{sys.argv[1]}/bench_pipeline1.txt"), parse(f"{sys.argv[1]}/bench_pipeline0.txt")
print("| model | product | type | n | chosen on / off | deq+cuBLAS | " + " | ".join(TILES) + " |")
print("|---" * (6 + len(TILES)) + "|")
for key in sorted(on, key=lambda k: (k[0], k[1], k[2], k[3])):
    a, b = on[key], off.get(key)
    if not b:
        continue
    tiles = " | ".join(f"{x} / {y}" for x, y in zip(a[2], b[2]))
    product = key[1].replace("|", "\\|")  # gate|up: a table cell
    print(f"| {key[0]} | {product} | {key[2]} | {key[3]} | {a[0]} / {b[0]} | {a[1]} | {tiles} |")
