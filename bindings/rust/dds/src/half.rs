//! Bit-exact conversions between `f32` and the 16-bit dtypes (bfloat16, IEEE fp16), stored as
//! raw bits in `u16`, rounding to nearest even exactly as libdds does (`kernels/dtype.h`).

/// bfloat16 bits to `f32` (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// `f32` to bfloat16 bits, round to nearest even; NaN stays NaN.
pub fn f32_to_bf16(f: f32) -> u16 {
    let b = f.to_bits();
    if (b & 0x7fff_ffff) > 0x7f80_0000 {
        return ((b >> 16) | 0x40) as u16;
    }
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (r >> 16) as u16
}

/// fp16 bits to `f32` (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    if exp == 0x1f {
        return f32::from_bits(sign | 0x7f80_0000 | (man << 13));
    }
    if exp == 0 {
        if man == 0 {
            return f32::from_bits(sign);
        }
        let v = man as f32 * 5.960_464_5e-8_f32; // 2^-24
        return if sign != 0 { -v } else { v };
    }
    f32::from_bits(sign | ((exp + 112) << 23) | (man << 13))
}

/// `f32` to fp16 bits, round to nearest even, overflow to infinity; NaN stays NaN.
pub fn f32_to_f16(f: f32) -> u16 {
    let b = f.to_bits();
    let sign = (b >> 16) & 0x8000;
    let absb = b & 0x7fff_ffff;
    if absb > 0x7f80_0000 {
        return (sign | 0x7e00) as u16;
    }
    if absb >= 0x477f_f000 {
        return (sign | 0x7c00) as u16;
    }
    if absb < 0x3880_0000 {
        if absb < 0x3300_0000 {
            return sign as u16;
        }
        let e = absb >> 23;
        let m = (absb & 0x7f_ffff) | 0x80_0000;
        let shift = 126 - e;
        let mut q = m >> shift;
        let rem = m & ((1u32 << shift) - 1);
        let half = 1u32 << (shift - 1);
        if rem > half || (rem == half && (q & 1) != 0) {
            q += 1;
        }
        return (sign | q) as u16;
    }
    let mut r = absb - 0x3800_0000;
    r = r + 0xfff + ((r >> 13) & 1);
    (sign | (r >> 13)) as u16
}

/// Converts a slice of `f32` to bfloat16 bits.
pub fn to_bf16(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| f32_to_bf16(x)).collect()
}

/// Converts a slice of `f32` to fp16 bits.
pub fn to_f16(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| f32_to_f16(x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trips() {
        for &x in &[0.0f32, -0.0, 1.0, -2.5, 65504.0, 1e-7, 3.140625, f32::INFINITY, -f32::INFINITY] {
            assert_eq!(bf16_to_f32(f32_to_bf16(x)).to_bits() >> 16, f32_to_bf16(x) as u32);
            let h = f32_to_f16(x);
            assert_eq!(f32_to_f16(f16_to_f32(h)), h);
        }
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
    }
}
