#!/usr/bin/env bash
# Builds the release build with CUDA into build-cuda and copies what the GPU machine needs into
# bundle/ (ignored by git): the roseinfer binary, every test executable (CPU and GPU), the shared
# libraries that machine lacks, and the files the tests read. Carry it with `carry: ["bundle"]`
# and run scripts/gpu_check.sh there. Binaries find the libraries through RPATH $ORIGIN (CMake sets
# it); gpu_check.sh also sets LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
# Keep the default build-cuda: the flags below would reconfigure (and rebuild) another directory.
BUILD=${BUILD:-build-cuda}

# Device code for the H100/H200 only (sm_90a, no PTX) and stored uncompressed in the fatbinary:
# nvcc's own compression leaves xz nothing to find, while uncompressed SASS packs ~5x smaller
# (kernels/cuda/gemm_quant.cu's object: 9.6 MB through xz as the default build makes it, 2.0 MB
# this way), which keeps roseinfer and two GPU executables inside a call's 64 MiB.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DCMAKE_CUDA_FLAGS="-compress-mode=none" >/dev/null
# Keep going past a broken target so the rest still lands in the bundle; the exit status says so.
# TARGETS="roseinfer gpu_test_cuda_kernels ..." builds only those (the rest of the bundle is
# whatever the build directory already holds).
build_status=0
target_args=()
for t in ${TARGETS:-}; do target_args+=(--target "$t"); done
cmake --build "$BUILD" -j "$JOBS" "${target_args[@]}" -- -k || build_status=$?

rm -rf bundle
mkdir -p bundle
# ONLY="roseinfer gpu_test_cuda_backend ..." puts only those executables in the bundle (each GPU
# executable carries every kernel, ~14 MB: all of them exceed the carry limit with the tree).
if [[ -n "${ONLY:-}" ]]; then
  for exe in $ONLY; do cp "$BUILD/$exe" bundle/; done
else
  [[ -f "$BUILD/roseinfer" ]] && cp "$BUILD/roseinfer" bundle/
  for exe in "$BUILD"/test_* "$BUILD"/gpu_test_* "$BUILD"/gpu_bench_*; do
    [[ -f "$exe" && -x "$exe" ]] && cp "$exe" bundle/
  done
fi
for lib in libsimdjson.so.14 libpcre2-8.so.0 libfmt.so.9 libutf8proc.so.2; do
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && !found {print $NF; found = 1}')
  if [[ -n "$path" ]]; then cp -L "$path" bundle/; else echo "warning: $lib not found" >&2; fi
done
# The 64 MiB carry limit: debug sections are not needed there.
strip --strip-unneeded bundle/* 2>/dev/null || true
echo "bundle/: $(ls bundle | wc -l) files, $(du -sh bundle | cut -f1)"
# The GPU executables carry every kernel's device code (~24 MB each), more than the device tool's
# 64 MiB carry limit together: carry the xz archive and unpack it there with
# `tar xJf bundle-pack/bundle.tar.xz`. The executables share that code byte for byte, so a
# dictionary larger than one executable compresses each copy after the first to almost nothing
# (five of them: 64 MB with xz's default 8 MiB dictionary, 18 MB with 128 MiB). Built as above
# (uncompressed SASS, ~150 MB an executable) the window must span them: roseinfer and two GPU
# executables pack into 23.8 MB with 128 MiB, 9.3 MB with 512 MiB (~4 min, ~5 GB of memory).
mkdir -p bundle-pack
tar cf - bundle | xz -6 --lzma2=dict=512MiB -T1 >bundle-pack/bundle.tar.xz
echo "bundle-pack/bundle.tar.xz: $(du -sh bundle-pack/bundle.tar.xz | cut -f1) (carry [\"bundle-pack\"])"
if [[ $build_status != 0 ]]; then
  echo "warning: the build failed (status $build_status); bundle/ holds only what was built" >&2
  exit 1
fi
