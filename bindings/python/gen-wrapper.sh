#!/usr/bin/env bash
# Generates the SWIG wrapper of the Python extension into bindings/python/_generated/
# (dds_wrap.c), for machines that have no SWIG (the GPU machine): the package build uses it when
# `swig` is not found (or DDS_SWIG_WRAPPER points at a copy). The output is ignored by git: never
# commit it. Regenerate after any change to include/dds/dds.h, include/dds/dds_shard.h or
# src/dds.i.
#
#   bindings/python/gen-wrapper.sh [output-dir]      (default: bindings/python/_generated)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/_generated}"
swig_bin="${SWIG:-$(command -v swig4.0 || command -v swig || true)}"
if [[ -z "$swig_bin" ]]; then
  echo "gen-wrapper.sh: swig not found (apt-get install swig, or pip install swig)" >&2
  exit 1
fi
mkdir -p "$out"
"$swig_bin" -python -builtin -I"$root/include" -o "$out/dds_wrap.c" -outdir "$out" \
  "$here/src/dds.i"
rm -f "$out/dds.py"  # -builtin: the C module is complete; the proxy module is not used
{
  echo "swig: $("$swig_bin" -version | awk '/SWIG Version/ {print $3}')"
  echo "dds.h sha256: $(sha256sum "$root/include/dds/dds.h" | cut -d' ' -f1)"
  echo "dds_shard.h sha256: $(sha256sum "$root/include/dds/dds_shard.h" | cut -d' ' -f1)"
  echo "dds.i sha256: $(sha256sum "$here/src/dds.i" | cut -d' ' -f1)"
} > "$out/STAMP"
echo "gen-wrapper.sh: wrote $out/dds_wrap.c ($(wc -l < "$out/dds_wrap.c") lines)"
