// Host emulation of the 16-bit CUDA types kernels/stash/ uses (on top of cuda_emu.h and
// cuda_emu_sample.h): __nv_bfloat16 / __half storage, their x2 pairs, __hmax2 (NaN ignored
// unless both are NaN, as the hardware), conversions to float.
#pragma once
#include "cuda_emu_sample.h"
#include "dtype.h"
struct __nv_bfloat16 { unsigned short x; };
struct __half { unsigned short x; };
struct __nv_bfloat162 { __nv_bfloat16 lo, hi; };
struct __half2 { __half lo, hi; };
inline float __half2float(__half h) { return dds::f16_to_f32(h.x); }
inline __half __ushort_as_half(unsigned short s) { return __half{s}; }
inline float emu_f(__nv_bfloat16 v) { return dds::bf16_to_f32(v.x); }
inline float emu_f(__half v) { return dds::f16_to_f32(v.x); }
template <typename H> inline H emu_hmax(H a, H b) {
  const float fa = emu_f(a), fb = emu_f(b);
  if (fa != fa) return b;  // (both NaN: b, a NaN)
  if (fb != fb) return a;
  return fa >= fb ? a : b;
}
inline __nv_bfloat162 __hmax2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return __nv_bfloat162{emu_hmax(a.lo, b.lo), emu_hmax(a.hi, b.hi)};
}
inline __half2 __hmax2(__half2 a, __half2 b) { return __half2{emu_hmax(a.lo, b.lo), emu_hmax(a.hi, b.hi)}; }
inline float __low2float(__nv_bfloat162 m) { return emu_f(m.lo); }
inline float __high2float(__nv_bfloat162 m) { return emu_f(m.hi); }
inline float __low2float(__half2 m) { return emu_f(m.lo); }
inline float __high2float(__half2 m) { return emu_f(m.hi); }
