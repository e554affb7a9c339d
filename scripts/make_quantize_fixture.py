#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/quantize_ref.gguf: an F32 matrix "input" and the Python gguf package's
quantization of it to Q8_0 and Q4_0 (tensors "Q8_0", "Q4_0"; gguf.quants reproduces ggml's reference
quantizers bit for bit). tests/test_quantize.cpp checks that rose::quantize writes the same bytes,
without needing the package.

Rows: random normal data at three magnitudes, plus blocks that probe the rounding rules: an all-zero
block (Q4_0's d is -0), exact halves (round half away from zero), ties for the largest magnitude
(the first one wins in Q4_0), a block whose scale is an fp16 subnormal, and a large one.

Needs: pip install gguf==0.19 numpy. Run from the repository root.
"""
import sys

import numpy as np
import gguf
from gguf import quants
from gguf.constants import GGMLQuantizationType as T

OUT = "tests/fixtures/gguf/quantize_ref.gguf"
ROWS, COLS = 8, 256


def main():
    rng = np.random.default_rng(20261123)
    data = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    data[1] *= 0.02  # typical weight magnitudes
    data[2] *= 40.0
    special = data[3].reshape(8, 32)
    special[0] = 0.0
    special[1] = np.arange(32, dtype=np.float32) - 15.5  # x / d lands on exact halves for Q8_0
    special[2] = np.float32(127.0) * np.sign(rng.standard_normal(32)).astype(np.float32)
    special[2, 5] = -127.0  # ties for amax: Q4_0 takes the first of largest magnitude
    special[2, 0] = 127.0
    special[3] = rng.standard_normal(32).astype(np.float32) * np.float32(1e-6)  # subnormal fp16 d
    special[4] = rng.standard_normal(32).astype(np.float32) * np.float32(3e3)
    special[5, :] = 1.0
    special[6] = np.float32(2.5) * (np.arange(32, dtype=np.float32) % 7 - 3)
    special[7] = -special[6]
    data[3] = special.reshape(COLS)
    writer = gguf.GGUFWriter(OUT, "fixture")
    writer.add_string("fixture.note", "input and its gguf.quants Q8_0 / Q4_0 quantization")
    writer.add_tensor("input", data)
    for qtype in (T.Q8_0, T.Q4_0):
        writer.add_tensor(qtype.name, quants.quantize(data, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
