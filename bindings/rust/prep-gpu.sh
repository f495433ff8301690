#!/usr/bin/env bash
# Builds the Rust GPU test binary HERE (the GPU machine has no cargo) and copies it to
# <repo>/.gpu-artifacts/rust/dds-gpu-test (gitignored; copy `.gpu-artifacts/rust` to the GPU machine).
#   DDS_LIB_DIR=/path/to/any/libdds/build bindings/rust/prep-gpu.sh
# Linking needs some libdds.so (the CPU-only build is fine: the symbols are the same); on the
# device the binary loads the CUDA-enabled libdds.so.0 through LD_LIBRARY_PATH (gpu-test.sh).
# It links the CUDA runtime statically (libcudart_static.a from $CUDA_HOME/lib64, default
# /usr/local/cuda), so the device needs only the driver.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
export DDS_LIB_DIR="${DDS_LIB_DIR:-${DDS_BUILD_DIR:-}}"
if [ -z "$DDS_LIB_DIR" ]; then
  for d in "$root/build-rust" "$root/build"; do
    if [ -e "$d/libdds.so" ]; then DDS_LIB_DIR="$d"; break; fi
  done
fi
[ -n "$DDS_LIB_DIR" ] || { echo "prep-gpu.sh: set DDS_LIB_DIR to a directory holding libdds.so" >&2; exit 2; }
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
rm -f "$here/Cargo.lock"

json="$(mktemp)"
trap 'rm -f "$json"' EXIT
cargo test --offline --features cuda-tests --test gpu --no-run --message-format=json > "$json"
# The test executable: the compiler-artifact message of target "gpu" built as a test.
exe="$(python3 - "$json" <<'PY'
import json, sys
exe = None
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "gpu" \
            and m.get("profile", {}).get("test") and m.get("executable"):
        exe = m["executable"]
print(exe or "")
PY
)"
if [ -z "$exe" ] || [ ! -x "$exe" ]; then
  echo "prep-gpu.sh: could not find the gpu test executable in cargo's JSON output" >&2
  exit 1
fi
dest="$root/.gpu-artifacts/rust"
mkdir -p "$dest"
cp "$exe" "$dest/dds-gpu-test"
chmod +x "$dest/dds-gpu-test"
echo "prep-gpu.sh: $exe -> $dest/dds-gpu-test ($(du -h "$dest/dds-gpu-test" | cut -f1))"
echo "prep-gpu.sh: on the device, from the repo root: bindings/rust/gpu-test.sh build-gpu"
