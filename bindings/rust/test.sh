#!/usr/bin/env bash
# CI entry of the Rust bindings (called by scripts/test.sh with libdds already built):
#   DDS_LIB_DIR=/path/to/build bindings/rust/test.sh     (or DDS_BUILD_DIR=...)
# 1. makes sure cargo/rustc and the bindgen CLI exist (Debian: apt-get install cargo rustc bindgen
#    clang when missing; rustup's ~/.cargo/bin is used when present);
# 2. regenerates the raw bindings from include/dds/dds.h and FAILS if they differ from the
#    checked-in dds-sys/src/bindings.rs;
# 3. cargo test, the demo example and cargo doc, all --offline (zero crates.io dependencies).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

export DDS_LIB_DIR="${DDS_LIB_DIR:-${DDS_BUILD_DIR:-}}"
if [ -z "$DDS_LIB_DIR" ]; then
  echo "bindings/rust/test.sh: set DDS_LIB_DIR (or DDS_BUILD_DIR) to the directory holding libdds.so" >&2
  exit 2
fi
if [ ! -e "$DDS_LIB_DIR/libdds.so" ]; then
  echo "bindings/rust/test.sh: DDS_LIB_DIR=$DDS_LIB_DIR holds no libdds.so (build libdds first)" >&2
  exit 2
fi
DDS_LIB_DIR="$(cd "$DDS_LIB_DIR" && pwd)"
export LD_LIBRARY_PATH="$DDS_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"

apt_install() {
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "bindings/rust/test.sh: apt-get install -y $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null ||
      { DEBIAN_FRONTEND=noninteractive apt-get update >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null; }
  else
    echo "bindings/rust/test.sh: missing $* (install them, e.g. apt-get install $*)" >&2
    exit 2
  fi
}

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    apt_install cargo rustc
  fi
fi
if ! command -v bindgen >/dev/null 2>&1; then
  apt_install bindgen clang
fi
echo "bindings/rust/test.sh: $(cargo --version), $(rustc --version), $(bindgen --version 2>&1 | head -1)"

# The lock file is not checked in (no dependencies); one written by a newer cargo (format v4)
# would stop an older one, so start from none.
rm -f "$here/Cargo.lock"

echo "== bindings: regenerate and compare"
"$here/dds-sys/regen.sh" --check

echo "== cargo test"
cargo test --offline --no-fail-fast

echo "== cargo run --example demo"
cargo run --offline --example demo

echo "== cargo doc"
cargo doc --offline --no-deps
echo "bindings/rust/test.sh: OK"
