package dds

import "math"

// F32ToBF16 rounds f to bfloat16 (round to nearest even; NaN stays a quiet NaN) and returns its
// bit pattern.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + ((b >> 16) & 1)
	return uint16(b >> 16)
}

// BF16ToF32 converts a bfloat16 bit pattern to float32 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToF16 rounds f to IEEE binary16 (round to nearest even; overflow to infinity; NaN stays
// a quiet NaN) and returns its bit pattern.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff { // inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f { // overflow
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal or zero in f16
		if e < -10 {
			return sign // rounds to zero (below half the smallest subnormal)
		}
		m := man | 0x800000 // implicit bit
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rest := m & ((uint32(1) << shift) - 1)
		r := m >> shift
		if rest > half || (rest == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rest := man & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, up to infinity: correct
	}
	return sign | uint16(r)
}

// F16ToF32 converts an IEEE binary16 bit pattern to float32 (exact).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(man) / (1 << 24) // exact
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// ToBF16 converts a slice to bfloat16 bit patterns.
func ToBF16(src []float32) []uint16 {
	out := make([]uint16, len(src))
	for i, f := range src {
		out[i] = F32ToBF16(f)
	}
	return out
}

// ToF16 converts a slice to binary16 bit patterns.
func ToF16(src []float32) []uint16 {
	out := make([]uint16, len(src))
	for i, f := range src {
		out[i] = F32ToF16(f)
	}
	return out
}
