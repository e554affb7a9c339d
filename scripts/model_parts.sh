#!/usr/bin/env bash
# The real SmolLM2 GGUF (98 MB) is larger than the device tool's 64 MiB carry limit, so it travels
# in five calls made back to back while the GPU machine is warm. Each call also carries the working
# tree: tracked files and untracked files git does not ignore, such as device outputs copied into
# results/ and not yet committed (the tracked files were 9.9 MB on 2026-12-03; the limit is 64 MiB
# = 67.1 MB in all). On 2026-12-02 a 25 MB part was refused, and so was a 24.8 MB bundle archive
# (22.8 MB passed), probably because such uncommitted outputs travelled too (not checked). The
# split is now 4 x 20 + 18.4 MB for margin. Carry the bundle in a call of its own before the parts
# and unpack it to /tmp there.
#   here:       scripts/model_parts.sh split      # .model-part1/ .. .model-part5/
#   call 0:     carry ["bundle-pack"], command:
#               mkdir -p /tmp/new && tar xJf bundle-pack/bundle.tar.xz -C /tmp/new
#   calls 1-4:  carry [".model-partK"], command: scripts/model_parts.sh stage K
#   call 5:     carry [".model-part5"], command: scripts/model_parts.sh stage 5 &&
#               MODEL=$(scripts/model_parts.sh join) && cp -r /tmp/new/bundle . && ...
#               (results/2026-12-02-h100/3_smollm2/script.sh does this)
# join concatenates the parts in /tmp/rose-model, checks the sha256 and prints the model's path.
set -euo pipefail
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=/tmp/rose-model
PARTS=5
PART_BYTES=20000000
case "${1:-}" in
  split)
    src=$(scripts/fetch_default_model.sh)
    rm -rf .model-part[0-9]
    local_blocks=$((PART_BYTES / 1000000))
    # Parts of PART_BYTES (a whole number of 1 MB dd blocks), the last one the rest.
    for k in $(seq 1 "$PARTS"); do
      mkdir -p ".model-part$k"
      count=$local_blocks
      ((k == PARTS)) && count=1000  # the rest
      dd if="$src" of=".model-part$k/part" bs=1000000 skip="$(((k - 1) * local_blocks))" \
        count="$count" status=none
    done
    ls -la .model-part[0-9]
    ;;
  stage)
    k=${2:?stage needs the part number}
    mkdir -p "$DEST" && cp ".model-part$k/part" "$DEST/part$k" && ls -la "$DEST"
    ;;
  join)
    for k in $(seq 1 "$PARTS"); do
      [[ -f "$DEST/part$k" ]] || { echo "join: $DEST/part$k is missing (an earlier call ran on another machine?)" >&2; exit 1; }
    done
    for k in $(seq 1 "$PARTS"); do cat "$DEST/part$k"; done >"$DEST/$NAME"
    echo "$SHA256  $DEST/$NAME" | sha256sum -c - >&2
    echo "$DEST/$NAME"
    ;;
  *) echo "usage: $0 split | stage 1..$PARTS | join" >&2; exit 2 ;;
esac
