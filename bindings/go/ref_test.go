package dds_test

// An independent Go implementation of docs/sampling.md (Philox4x32-10, the Gumbel noise, the
// filters and the two-level Gumbel-max), used as a second oracle next to the C library.

import (
	"math"
	"math/big"
	"math/bits"
	"sort"
)

const (
	saltBlock = 0x424C4B31
	saltToken = 0x544F4B31
	blockSize = 1024
)

func philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	const m0, m1, w0, w1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
	c, k := ctr, key
	for i := 0; i < 10; i++ {
		hi0, lo0 := bits.Mul32(m0, c[0])
		hi1, lo1 := bits.Mul32(m1, c[2])
		c = [4]uint32{hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0}
		k[0] += w0
		k[1] += w1
	}
	return c
}

func randomBits(seed uint64, step, pos, id, salt uint32) uint64 {
	x := philox4x32([4]uint32{id, pos, step, salt}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return uint64(x[0]) | uint64(x[1])<<32
}

func gumbel(seed uint64, step, pos, id, salt uint32) float64 {
	b := randomBits(seed, step, pos, id, salt)
	u := float64((b>>11)|1) * 0x1p-53
	e := -math.Log1p(-u)
	return -math.Log(e)
}

// fmaf32 is fmaf(g, d, c) correctly rounded to float32 (exact arithmetic, one rounding).
func fmaf32(g, d, c float32) float32 {
	x := new(big.Float).SetPrec(256).SetFloat64(float64(g))
	x.Mul(x, new(big.Float).SetPrec(256).SetFloat64(float64(d)))
	x.Add(x, new(big.Float).SetPrec(256).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// guide returns the guided logits of one row (§2 steps 1-2), ban included.
func guide(c, u []float32, g float32, guided bool, banned int) []float32 {
	l := make([]float32, len(c))
	for t := range c {
		switch {
		case !guided:
			l[t] = c[t]
		case math.IsInf(float64(c[t]), -1) || math.IsInf(float64(u[t]), -1):
			l[t] = float32(math.Inf(-1))
		default:
			l[t] = fmaf32(g, c[t]-u[t], c[t])
		}
		if t == banned || l[t] != l[t] {
			l[t] = float32(math.Inf(-1))
		}
		if math.IsInf(float64(l[t]), 1) {
			l[t] = math.MaxFloat32
		}
	}
	return l
}

type refParams struct {
	T        float32
	K        int
	P, MinP  float32
	Seed     uint64
	Step     uint32
	Position uint32
}

// refKept returns the processed values a and the kept set (§3), or greedy = true.
func refKept(l []float32, q refParams) (a []float32, keep []bool, greedy bool) {
	v := len(l)
	keep = make([]bool, v)
	invT := float32(1) / q.T
	if q.T == 0 || math.IsInf(float64(invT), 1) {
		return nil, nil, true
	}
	a = make([]float32, v)
	var order []int
	for t := range l {
		if math.IsInf(float64(l[t]), -1) {
			a[t] = float32(math.Inf(-1))
			continue
		}
		a[t] = l[t] * invT
		if math.IsInf(float64(a[t]), 1) {
			a[t] = math.MaxFloat32
		}
		order = append(order, t)
	}
	if len(order) == 0 {
		return a, keep, false
	}
	sort.SliceStable(order, func(i, j int) bool {
		if a[order[i]] != a[order[j]] {
			return a[order[i]] > a[order[j]]
		}
		return order[i] < order[j]
	})
	m := float64(a[order[0]])
	if q.K > 0 && q.K < len(order) {
		order = order[:q.K]
	}
	if q.P < 1 {
		z := 0.0
		for _, t := range order {
			z += math.Exp(float64(a[t]) - m)
		}
		s, n := 0.0, 0
		for i, t := range order {
			if i > 0 && !(s < float64(q.P)*z) {
				break
			}
			s += math.Exp(float64(a[t]) - m)
			n++
		}
		order = order[:n]
	}
	if q.MinP > 0 {
		mp := math.Min(float64(q.MinP), 1)
		var k []int
		for _, t := range order {
			if math.Exp(float64(a[t])-m) >= mp {
				k = append(k, t)
			}
		}
		order = k
	}
	for _, t := range order {
		keep[t] = true
	}
	return a, keep, false
}

// refSample is the token of one row (§4); -1 for an empty row.
func refSample(l []float32, q refParams) int {
	a, keep, greedy := refKept(l, q)
	v := len(l)
	if greedy {
		best := -1
		for t := 0; t < v; t++ {
			if !math.IsInf(float64(l[t]), -1) && (best < 0 || l[t] > l[best]) {
				best = t
			}
		}
		return best
	}
	m := math.Inf(-1)
	for t := 0; t < v; t++ {
		if keep[t] {
			m = math.Max(m, float64(a[t]))
		}
	}
	bb, best := -1, 0.0
	for b := 0; b*blockSize < v; b++ {
		s, any := 0.0, false
		for t := b * blockSize; t < v && t < (b+1)*blockSize; t++ {
			if keep[t] {
				s += math.Exp(float64(a[t]) - m)
				any = true
			}
		}
		if !any {
			continue
		}
		sc := math.Log(s) + m + gumbel(q.Seed, q.Step, q.Position, uint32(b), saltBlock)
		if bb < 0 || sc > best {
			bb, best = b, sc
		}
	}
	if bb < 0 {
		return -1
	}
	tok, bv := -1, 0.0
	for t := bb * blockSize; t < v && t < (bb+1)*blockSize; t++ {
		if !keep[t] {
			continue
		}
		x := float64(a[t]) + gumbel(q.Seed, q.Step, q.Position, uint32(t), saltToken)
		if tok < 0 || x > bv {
			tok, bv = t, x
		}
	}
	return tok
}

// refSoftmax is the distribution softmax(x) over the columns with keep (nil = finite ones).
func refSoftmax(x []float32, keep []bool) []float64 {
	m := math.Inf(-1)
	in := func(t int) bool {
		if keep != nil {
			return keep[t]
		}
		return !math.IsInf(float64(x[t]), -1)
	}
	for t := range x {
		if in(t) {
			m = math.Max(m, float64(x[t]))
		}
	}
	p := make([]float64, len(x))
	z := 0.0
	for t := range x {
		if in(t) {
			p[t] = math.Exp(float64(x[t]) - m)
			z += p[t]
		}
	}
	for t := range p {
		p[t] /= z
	}
	return p
}
