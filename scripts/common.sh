# shellcheck shell=bash
# Shared helpers of scripts/demo.sh, scripts/test-c.sh and scripts/test.sh (sourced, not run).
# They install only what is missing (checked with `command -v` and friends), as root on Debian
# (or through sudo), and configure + build libdds into ./build ($DDS_BUILD_DIR_NAME overrides).
#
# Environment:
#   DDS_BUILD_DIR_NAME  build folder under the repository root (default: build)
#   DDS_WITH_CUDA       AUTO (default), ON or OFF: the CMake option of the same name
#   DDS_JOBS            parallel build / test jobs (default: nproc)
#   DDS_NO_INSTALL=1    never install packages; fail if something is missing

DDS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DDS_BUILD="${DDS_ROOT}/${DDS_BUILD_DIR_NAME:-build}"
DDS_JOBS="${DDS_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# Toolchains installed outside apt (rustup, the Go tarball, pyenv) are used when present.
for _d in "${HOME:-/root}/.cargo/bin" /usr/local/go/bin "${HOME:-/root}/go/bin"; do
  if [[ -d "$_d" && ":$PATH:" != *":$_d:"* ]]; then PATH="$_d:$PATH"; fi
done
export PATH

dds_log() { printf '\n=== %s\n' "$*" >&2; }
dds_die() { printf '\nERROR: %s\n' "$*" >&2; exit 1; }

_dds_apt_updated=0
# dds_apt_install PKG...: installs Debian packages (apt-get update once per run).
dds_apt_install() {
  (($# > 0)) || return 0
  [[ "${DDS_NO_INSTALL:-0}" != 1 ]] || dds_die "missing packages: $* (DDS_NO_INSTALL=1)"
  command -v apt-get >/dev/null || dds_die "missing packages: $* (no apt-get: install them by hand)"
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null || dds_die "missing packages: $* (run as root, or install sudo)"
    sudo=(sudo)
  fi
  dds_log "installing: $*"
  export DEBIAN_FRONTEND=noninteractive
  if ((_dds_apt_updated == 0)); then
    "${sudo[@]}" apt-get update -qq
    _dds_apt_updated=1
  fi
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@"
}

_dds_have_doctest() {
  [[ -f /usr/include/doctest/doctest.h || -f "${DDS_ROOT}/.deps/include/doctest/doctest.h" ||
     ( -n "${DDS_DOCTEST_DIR:-}" && -f "${DDS_DOCTEST_DIR}/doctest/doctest.h" ) ]]
}

# What the C library, its tests and examples need.
dds_ensure_c_deps() {
  local need=()
  command -v cmake >/dev/null || need+=(cmake)
  command -v ninja >/dev/null || command -v make >/dev/null || need+=(ninja-build)
  command -v gcc >/dev/null || need+=(gcc)
  command -v g++ >/dev/null || need+=(g++)
  command -v pkg-config >/dev/null || need+=(pkg-config)
  command -v readelf >/dev/null && command -v nm >/dev/null || need+=(binutils)
  _dds_have_doctest || need+=(doctest-dev)
  command -v ninja >/dev/null || need+=(ninja-build) # preferred generator
  # shellcheck disable=SC2207
  need=($(printf '%s\n' "${need[@]}" | sort -u))
  dds_apt_install "${need[@]}"
  local v
  v="$(cmake --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')"
  if [[ "$(printf '%s\n3.24\n' "$v" | sort -V | head -1)" != 3.24 ]]; then
    dds_die "cmake $v is too old: dds needs 3.24 or newer"
  fi
}

_dds_python_ok() {
  command -v python3 >/dev/null && python3 - <<'PY' >/dev/null 2>&1
import os, sys, sysconfig, ensurepip, venv
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
}

# What the Python (SWIG), Rust (bindgen) and Go (cgo) bindings need.
dds_ensure_binding_deps() {
  local need=()
  command -v swig >/dev/null || need+=(swig)
  command -v go >/dev/null || need+=(golang-go)
  command -v bindgen >/dev/null || need+=(bindgen)
  # bindgen loads libclang at run time and needs clang's own headers (stddef.h, ...).
  if ! ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' ||
     ! compgen -G '/usr/lib/llvm-*/lib/clang/*/include/stddef.h' >/dev/null; then
    need+=(libclang-dev)
  fi
  command -v cargo >/dev/null || need+=(cargo)
  command -v rustc >/dev/null || need+=(rustc)
  if ! _dds_python_ok; then
    need+=(python3 python3-dev python3-venv python3-pip)
  fi
  dds_apt_install "${need[@]}"
  _dds_python_ok || dds_log "warning: $(command -v python3 || echo python3) lacks Python.h, venv or ensurepip"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    dds_log "warning: python3 -m pip is not available"
  fi
}

# Configures (DDS_WITH_CUDA, default AUTO) and builds libdds into $DDS_BUILD; extra arguments are
# passed to `cmake --build` (e.g. --target dds_demo).
dds_configure_build() {
  local gen=()
  if [[ ! -f "${DDS_BUILD}/CMakeCache.txt" ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
  dds_log "configuring ${DDS_BUILD} (DDS_WITH_CUDA=${DDS_WITH_CUDA:-AUTO})"
  # Tests and examples are set explicitly: a build folder configured earlier without them must not
  # make the test stage find no tests.
  cmake -S "${DDS_ROOT}" -B "${DDS_BUILD}" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DDDS_WITH_CUDA="${DDS_WITH_CUDA:-AUTO}" -DDDS_BUILD_TESTS=ON -DDDS_BUILD_EXAMPLES=ON
  dds_log "building (${DDS_JOBS} jobs)"
  cmake --build "${DDS_BUILD}" -j "${DDS_JOBS}" "$@"
}
