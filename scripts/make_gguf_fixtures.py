#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/quant_types.gguf: for each ggml type roseinfer dequantizes, a tensor
"q.<TYPE>" stored in that type and "expected.<TYPE>", the Python gguf package's dequantization of
the same bytes, stored as F32. tests/test_gguf.cpp checks our C++ dequantizer against them.

Types the package can quantize (F32..Q8_0) hold random normal data quantized by gguf.quants; the
K-quants, which it can only dequantize, hold random block bytes with finite, small fp16 scales.

Needs: pip install gguf==0.19 numpy. Run from the repository root.
"""
import sys

import numpy as np
import gguf
from gguf import quants
from gguf.constants import GGMLQuantizationType as T, GGML_QUANT_SIZES

OUT = "tests/fixtures/gguf/quant_types.gguf"
ROWS, COLS = 3, 512
QUANTIZABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
# Byte offsets of the fp16 scale fields in each K-quant block (ggml-common.h layouts).
K_QUANT_HALVES = {T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}


def random_k_blocks(rng, qtype, rows, cols):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = rows * cols // block_elems
    raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    for offset in K_QUANT_HALVES[qtype]:
        halves = rng.uniform(-0.05, 0.05, size=blocks).astype(np.float16)
        raw[:, offset:offset + 2] = halves.view(np.uint8).reshape(blocks, 2)
    return raw.reshape(rows, cols // block_elems * block_bytes)


def main():
    rng = np.random.default_rng(20261123)
    writer = gguf.GGUFWriter(OUT, "fixture")
    writer.add_string("fixture.note", "q.<TYPE> tensors and their gguf.quants.dequantize values")
    for qtype in QUANTIZABLE + list(K_QUANT_HALVES):
        if qtype in QUANTIZABLE:
            data = rng.standard_normal((ROWS, COLS)).astype(np.float32)
            stored = quants.quantize(data, qtype)
        else:
            stored = random_k_blocks(rng, qtype, ROWS, COLS)
        expected = quants.dequantize(stored, qtype).astype(np.float32)
        assert expected.shape == (ROWS, COLS) and np.isfinite(expected).all(), qtype.name
        writer.add_tensor(f"q.{qtype.name}", stored, raw_dtype=qtype)
        writer.add_tensor(f"expected.{qtype.name}", expected)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
