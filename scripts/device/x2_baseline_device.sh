#!/usr/bin/env bash
# Session 23's first call on nvidia-h200-x2 (bundle-pack/ carried: roseinfer, gpu_test_cuda_gemv_quant,
# gpu_test_cuda_tensor_parallel, gpu_test_cuda_all_reduce, gpu_bench_collectives): the direct
# quantized GEMV test (c970b03's traits, not yet run on a GPU), the 2-GPU data-parallel study
# (scripts/gpu2_study.sh) and llama-8b TP=1 vs TP=2 (scripts/device/tp_device.sh PHASES=bench8b), then, where
# nsys is present, the per-kernel time of a TP=1 and a TP=2 batch-1 run (graph nodes traced).
# Everything lands in $OUT: gpu2.tgz, tp.tgz, and nsys_*.csv.
set -uo pipefail
FINAL=${OUT:-/tmp/x2_out}
mkdir -p "$FINAL"
[[ -x bundle/roseinfer ]] || tar xJf bundle-pack/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/bundle:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{ timeout 150 bundle/gpu_test_cuda_gemv_quant; echo "gpu_test_cuda_gemv_quant rc=$?"; } >"$FINAL/gemv_quant_test.txt" 2>&1
tail -n 4 "$FINAL/gemv_quant_test.txt"
OUT=$FINAL DEADLINE=${GPU2_DEADLINE:-200} bash scripts/gpu2_study.sh >"$FINAL/gpu2_log.txt" 2>&1
tail -n 30 "$FINAL/gpu2_log.txt"
OUT=$FINAL TESTS="${TP_TESTS:-}" PHASES=bench8b DEADLINE=${TP_DEADLINE:-300} bash scripts/device/tp_device.sh >"$FINAL/tp_log.txt" 2>&1
tail -n 16 "$FINAL/tp_log.txt"
if command -v nsys >/dev/null; then
  for tp in 1 2; do
    timeout 150 nsys profile --cuda-graph-trace=node -f true -o "/tmp/nsys_tp$tp" bundle/roseinfer bench \
      --model llama-8b --device cuda --dataset-name grid:1:512:128 --tensor-parallel "$tp" \
      --max-num-seqs 64 --max-num-batched-tokens 8192 --mode offline >"$FINAL/nsys_tp${tp}_log.txt" 2>&1
    timeout 100 nsys stats -r cuda_gpu_kern_sum -f csv -o "$FINAL/nsys_tp$tp" "/tmp/nsys_tp$tp.nsys-rep" >>"$FINAL/nsys_tp${tp}_log.txt" 2>&1
    ls "$FINAL"/nsys_tp"$tp"* 2>/dev/null
  done
else
  echo "no nsys on this machine"
fi
