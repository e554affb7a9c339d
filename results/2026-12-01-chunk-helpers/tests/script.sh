#!/usr/bin/env bash
# Call 1 of 2 (the tree and both binaries exceed one call's 64 MiB): unpack the bundle (this
# build's roseinfer and GPU tests), keep a copy in /tmp/chunk-helpers-bundle for call 2
# (bench/script.sh, which brings the previous commit's build), and run the GPU tests. Repository root,
# bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/chunk-helpers-tests
rm -rf /tmp/chunk-helpers-bundle && cp -r "$B" /tmp/chunk-helpers-bundle
gpu_tests
device_pack
