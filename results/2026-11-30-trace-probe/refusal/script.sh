#!/usr/bin/env bash
# Session 41, call 10 (nvidia-h200): a build without the probe (446d92b, the default
# configuration) given ROSEINFER_CUDA_TRACE_FILE: it must stop with an error naming the build
# option and exit nonzero; and the same run without the variable.
set -uo pipefail
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/bundle:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
bundle/roseinfer --version
ROSEINFER_CUDA_TRACE_FILE=/tmp/trace.txt bundle/roseinfer run datasets/sample.jsonl --device cuda \
  -o /tmp/out_traced.jsonl
echo "with ROSEINFER_CUDA_TRACE_FILE: exit $?; trace file: $(ls /tmp/trace.txt 2>&1)"
bundle/roseinfer run datasets/sample.jsonl --device cuda -o /tmp/out.jsonl >/dev/null 2>&1
echo "without: exit $?; $(wc -l < /tmp/out.jsonl) output lines"
