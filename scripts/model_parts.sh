#!/usr/bin/env bash
# The real SmolLM2 GGUF (98 MB) is larger than the device tool's 64 MiB carry limit, so it travels
# in three calls made back to back while the GPU machine is warm. Each call also carries the
# tracked tree (~17 MB at 2026-11-24; the limit is 64 MiB = 67.1 MB in all), so the split is
# 45 + 45 + 8.4 MB, and the last call has room for a small bundle archive (roseinfer alone, ~5 MB).
#   here:       scripts/model_parts.sh split      # .model-part1/, .model-part2/, .model-part3/
#   call 1:     carry [".model-part1"], command: scripts/model_parts.sh stage 1
#   call 2:     carry [".model-part2"], command: scripts/model_parts.sh stage 2
#   call 3:     carry [".model-part3", "bundle-pack"], command:
#               scripts/model_parts.sh stage 3 && MODEL=$(scripts/model_parts.sh join) && ...
# join concatenates the parts in /tmp/rose-model, checks the sha256 and prints the model's path.
set -euo pipefail
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=/tmp/rose-model
PART_BYTES=45000000
case "${1:-}" in
  split)
    src=$(scripts/fetch_default_model.sh)
    rm -rf .model-part1 .model-part2 .model-part3 && mkdir -p .model-part1 .model-part2 .model-part3
    # Parts of PART_BYTES (a whole number of 1 MB dd blocks), the last one the rest.
    local_blocks=$((PART_BYTES / 1000000))
    dd if="$src" of=.model-part1/part bs=1000000 count="$local_blocks" status=none
    dd if="$src" of=.model-part2/part bs=1000000 skip="$local_blocks" count="$local_blocks" status=none
    dd if="$src" of=.model-part3/part bs=1000000 skip="$((2 * local_blocks))" status=none
    ls -la .model-part1 .model-part2 .model-part3
    ;;
  stage)
    k=${2:?stage needs the part number}
    mkdir -p "$DEST" && cp ".model-part$k/part" "$DEST/part$k" && ls -la "$DEST"
    ;;
  join)
    for k in 1 2 3; do
      [[ -f "$DEST/part$k" ]] || { echo "join: $DEST/part$k is missing (an earlier call ran on another machine?)" >&2; exit 1; }
    done
    cat "$DEST/part1" "$DEST/part2" "$DEST/part3" >"$DEST/$NAME"
    echo "$SHA256  $DEST/$NAME" | sha256sum -c - >&2
    echo "$DEST/$NAME"
    ;;
  *) echo "usage: $0 split | stage 1|2|3 | join" >&2; exit 2 ;;
esac
