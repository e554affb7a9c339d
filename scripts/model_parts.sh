#!/usr/bin/env bash
# The real SmolLM2 GGUF (98 MB) is larger than the device tool's 64 MiB carry limit, so it travels
# in two calls made back to back while the GPU machine is warm:
# Sizes: each call carries the tracked tree (~10 MB at 2026-11-23) too, and the limit is 64 MiB
# (67.1 MB), so the split is 54 MB + 44 MB, and the second call's bundle archive must stay under
# ~12 MB: pack roseinfer and the few test binaries that run (the whole bundle, with every GPU test,
# is ~31 MB xz).
#   here:       scripts/model_parts.sh split          # .model-part1/ (54 MB) and .model-part2/ (44 MB)
#   call 1:     carry [".model-part1"], command: scripts/model_parts.sh stage1
#   call 2:     carry [".model-part2", ...], command: scripts/model_parts.sh stage2 && ...
# stage2 joins the parts in /tmp/rose-model and checks the sha256; it prints the model's path.
set -euo pipefail
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=/tmp/rose-model
case "${1:-}" in
  split)
    src=$(scripts/fetch_default_model.sh)
    rm -rf .model-part1 .model-part2 && mkdir -p .model-part1 .model-part2
    head -c 54000000 "$src" >.model-part1/part
    tail -c +54000001 "$src" >.model-part2/part
    ls -la .model-part1 .model-part2
    ;;
  stage1)
    mkdir -p "$DEST" && cp .model-part1/part "$DEST/part1" && ls -la "$DEST"
    ;;
  stage2)
    [[ -f "$DEST/part1" ]] || { echo "stage2: $DEST/part1 is missing (stage1 ran on another machine?)" >&2; exit 1; }
    cat "$DEST/part1" .model-part2/part >"$DEST/$NAME"
    echo "$SHA256  $DEST/$NAME" | sha256sum -c - >&2
    echo "$DEST/$NAME"
    ;;
  *) echo "usage: $0 split|stage1|stage2" >&2; exit 2 ;;
esac
