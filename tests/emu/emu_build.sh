# Sourced by the run_*.sh scripts (which set `here`, `root`): emu_build NAME BUILD compiles
# tests/emu/emu_NAME.cpp, which includes the kernel headers as they are (tests/emu/include
# stands for the CUDA headers), against BUILD's libdds (the CPU backend is the oracle) into
# $out/emu_NAME, $out a new temporary folder.
emu_build() {
  local name=$1 build=$2
  out=$(mktemp -d)
  g++ -std=c++20 -O1 -pthread ${EMU_CXXFLAGS:-} -I"$here/include" -I"$here" -I"$root/include" \
      -I"$root/kernels" -I"$root/kernels/common" -I"$root/src" \
      "$here/emu_$name.cpp" -o "$out/emu_$name" -L"$build" -ldds -Wl,-rpath,"$build"
}
