#!/usr/bin/env bash
# Session 50, call 1 (nvidia-h200; carry bundle-pack): kept matrices decoded ahead on side streams
# (ROSEINFER_CUDA_DEQUANT_AHEAD=1, the default; 2: the step's stream at the highest priority)
# against each copy decoded on the step's stream just before its product (=0), one binary. Issue
# 12's large-batch cells, where every product past the quantized GEMVs' and the tile GEMM's rows
# decodes its matrix for cuBLAS: llama-1b and llama-8b in Q4_K and Q8_0 at 256 and 64 rows, bf16
# at 256 beside them, batch 1 unchanged (it decodes nothing), then the 256-row cells again. First
# the two GPU tests of decoded copies (same bits ahead and in line; the GGUF's kept matrices
# against the file decoded at load), last the whole backend test while time is left.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/ahead
DEADLINE=${DEADLINE:-530}
cell() {  # NAME BATCH AHEAD ARGS...
  local name=$1 batch=$2 ahead=$3
  shift 3
  if ((SECONDS > DEADLINE)); then
    echo "$name: skipped (past ${DEADLINE}s)" | tee -a "$SUMMARY"
    return 0
  fi
  offline_bench "$name" "$batch" ROSEINFER_CUDA_DEQUANT_AHEAD="$ahead" "$@"
}
step gpu_test_ahead 120 "$B/gpu_test_cuda_backend" -tc='kept matrices decoded ahead*,GGUF blocks kept*'
for a in 0 1 2; do cell "llama1b_q4_k_b256_a${a}" 256 "$a" --model llama-1b --quantize q4_k; done
cell llama1b_bf16_b256 256 1 --model llama-1b
for a in 0 1 2; do cell "llama8b_q4_k_b256_a${a}" 256 "$a" --model llama-8b --quantize q4_k; done
cell llama8b_bf16_b256 256 1 --model llama-8b
for a in 0 1; do cell "llama1b_q8_0_b256_a${a}" 256 "$a" --model llama-1b --quantize q8_0; done
for a in 0 1 2; do cell "llama1b_q4_k_b64_a${a}" 64 "$a" --model llama-1b --quantize q4_k; done
cell llama1b_bf16_b64 64 1 --model llama-1b
for a in 0 1; do cell "llama1b_q4_k_b1_a${a}" 1 "$a" --model llama-1b --quantize q4_k; done
for a in 0 1 2; do cell "llama1b_q4_k_b256_a${a}_r2" 256 "$a" --model llama-1b --quantize q4_k; done
for a in 0 1; do cell "llama8b_q8_0_b256_a${a}" 256 "$a" --model llama-8b --quantize q8_0; done
for a in 0 1 2; do cell "llama8b_q4_k_b256_a${a}_r2" 256 "$a" --model llama-8b --quantize q4_k; done
decode_step_table
if ((SECONDS < DEADLINE)); then step gpu_test_cuda_backend $((580 - SECONDS)) "$B/gpu_test_cuda_backend"; fi
device_pack
