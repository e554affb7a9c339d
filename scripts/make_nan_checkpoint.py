#!/usr/bin/env python3
"""Copies a safetensors model folder and writes NaN into chosen rows of one F32 tensor (and +inf
into the first value of the row after the last), making a checkpoint whose requests that read those
rows must fail with finish_reason "error" while the others go on. Standard library only.

    python3 scripts/make_nan_checkpoint.py tests/fixtures/models/tiny-qwen2 OUT_DIR \
        --tensor model.embed_tokens.weight --rows 300

Take a model with an untied head (tiny-qwen2): with tied embeddings the NaN row is also a logit of
every request, and every request fails.
"""
import argparse
import json
import math
import shutil
import struct
from pathlib import Path


def poison(path: Path, tensor: str, rows: list[int]) -> None:
    data = bytearray(path.read_bytes())
    (header_len,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + header_len])
    entry = header[tensor]
    if entry["dtype"] != "F32":
        raise SystemExit(f"{tensor}: dtype {entry['dtype']}, only F32 is supported")
    row_len = math.prod(entry["shape"][1:])
    base = 8 + header_len + entry["data_offsets"][0]
    for row in rows:
        struct.pack_into(f"<{row_len}f", data, base + 4 * row * row_len, *[math.nan] * row_len)
    struct.pack_into("<f", data, base + 4 * (max(rows) + 1) * row_len, math.inf)
    path.write_bytes(bytes(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("destination")
    parser.add_argument("--tensor", default="model.embed_tokens.weight")
    parser.add_argument("--rows", type=int, nargs="+", default=[300])
    args = parser.parse_args()
    shutil.copytree(args.source, args.destination, dirs_exist_ok=True)
    poison(Path(args.destination) / "model.safetensors", args.tensor, args.rows)


if __name__ == "__main__":
    main()
