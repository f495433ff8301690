# Sourced by run_sample.sh and run_stash.sh (which set `here`, `root`): emu_build NAME BUILD
# turns kernels/NAME.cuh into host C++ (emu_gen.py) and compiles tests/emu/emu_NAME.cpp against
# BUILD's libdds (the CPU backend is the oracle) into $out/emu_NAME, $out a new temporary folder.
emu_build() {
  local name=$1 build=$2
  out=$(mktemp -d)
  python3 "$here/emu_gen.py" "$name" "$root/kernels/$name.cuh" "$out/${name}_emu.cuh"
  g++ -std=c++20 -O1 -pthread ${EMU_CXXFLAGS:-} -I"$out" -I"$here" -I"$root/include" -I"$root/kernels" \
      "$here/emu_$name.cpp" -o "$out/emu_$name" -L"$build" -ldds -Wl,-rpath,"$build"
}
