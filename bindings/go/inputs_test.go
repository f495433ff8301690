// Input forms through the Go binding: probability and logit dtypes with strides, half conversions,
// per-request sanitisation, positions and batch invariance, the stash.

package dds_test

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	dds "github.com/dds/dds/bindings/go"
)

func ulps16(a, b uint16) int {
	d := int(a) - int(b)
	if d < 0 {
		d = -d
	}
	return d
}

func TestProbsDTypesAndStrides(t *testing.T) {
	const v, n, stride = 37, 5, 40
	rng := rand.New(rand.NewSource(3))
	s := newSampler(t, dds.Config{VocabSize: v})
	logits := randomRow(rng, n*v, 2)
	base := dds.NewSampleArgs()
	base.NumRows = n
	base.Logits = logits
	base.Temperature = 0.8
	base.Tokens = make([]int32, n)
	ref := fillF(n*stride, 12345)
	base.Probs, base.ProbsRowStride = ref, stride
	if err := s.Sample(&base); err != nil {
		t.Fatal(err)
	}
	for _, dt := range []dds.DType{dds.BF16, dds.F16} {
		a := base
		a.Tokens = make([]int32, n)
		a.Probs = nil
		a.Probs16 = make([]uint16, n*stride)
		for i := range a.Probs16 {
			a.Probs16[i] = 0xBEEF
		}
		a.ProbsDType = dt
		if err := s.Sample(&a); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			for x := 0; x < stride; x++ {
				got := a.Probs16[i*stride+x]
				if x >= v {
					if got != 0xBEEF {
						t.Fatalf("%v: padding written at row %d col %d", dt, i, x)
					}
					continue
				}
				want := dds.F32ToBF16(ref[i*stride+x])
				if dt == dds.F16 {
					want = dds.F32ToF16(ref[i*stride+x])
				}
				if ulps16(got, want) > 1 { // f64 -> 16 bits vs f64 -> f32 -> 16 bits
					t.Fatalf("%v probs[%d][%d] = %#x, want %#x", dt, i, x, got, want)
				}
			}
		}
		for i := range base.Tokens {
			if a.Tokens[i] != base.Tokens[i] {
				t.Errorf("tokens depend on the probs dtype")
			}
		}
	}
	for x := v; x < stride; x++ {
		if ref[x] != 12345 {
			t.Fatalf("f32 padding written")
		}
	}
}

// bf16 / f16 logits with a row stride equal f32 logits of the decoded values.
func TestLogitsDTypes(t *testing.T) {
	const v, n, stride = 1500, 6, 1503
	rng := rand.New(rand.NewSource(5))
	s := newSampler(t, dds.Config{VocabSize: v})
	f := randomRow(rng, n*stride, 3)
	for _, dt := range []dds.DType{dds.BF16, dds.F16} {
		var h []uint16
		if dt == dds.BF16 {
			h = dds.ToBF16(f)
		} else {
			h = dds.ToF16(f)
		}
		dec := make([]float32, len(h))
		for i, x := range h {
			if dt == dds.BF16 {
				dec[i] = dds.BF16ToF32(x)
			} else {
				dec[i] = dds.F16ToF32(x)
			}
		}
		a := dds.NewSampleArgs()
		a.NumRows, a.DType, a.RowStride, a.Logits16, a.Seed = n, dt, stride, h, 11
		a.Tokens, a.Entropy = make([]int32, n), make([]float32, n)
		b := dds.NewSampleArgs()
		b.NumRows, b.RowStride, b.Logits, b.Seed = n, stride, dec, 11
		b.Tokens, b.Entropy = make([]int32, n), make([]float32, n)
		if err := s.Sample(&a); err != nil {
			t.Fatal(err)
		}
		if err := s.Sample(&b); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if a.Tokens[i] != b.Tokens[i] || a.Entropy[i] != b.Entropy[i] {
				t.Errorf("%v row %d: token %d entropy %g, f32 of the decoded values: %d %g", dt, i,
					a.Tokens[i], a.Entropy[i], b.Tokens[i], b.Entropy[i])
			}
		}
	}
}

func TestHalfConversions(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		x := uint16(h)
		if f := dds.F16ToF32(x); f == f {
			if back := dds.F32ToF16(f); back != x {
				t.Fatalf("f16 %#x -> %g -> %#x", x, f, back)
			}
		}
		if f := dds.BF16ToF32(x); f == f {
			if back := dds.F32ToBF16(f); back != x {
				t.Fatalf("bf16 %#x -> %g -> %#x", x, f, back)
			}
		}
	}
	// Ties to even, overflow, the smallest subnormal.
	cases := []struct {
		f    float32
		want uint16
	}{{1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02}, {65520, 0x7c00}, {65519, 0x7bff},
		{float32(math.Ldexp(1, -24)), 0x0001}, {float32(math.Ldexp(1, -25)), 0x0000},
		{float32(math.Ldexp(1.5, -25)), 0x0001}, {-2, 0xc000}}
	for _, c := range cases {
		if got := dds.F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%g) = %#x, want %#x", c.f, got, c.want)
		}
	}
	if dds.F32ToBF16(1+1.0/256) != 0x3f80 || dds.F32ToBF16(1+3.0/256) != 0x3f82 {
		t.Errorf("bf16 ties to even")
	}
}

func TestPerRequestSanitisation(t *testing.T) {
	s := newSampler(t, dds.Config{VocabSize: 4})
	nan := float32(math.NaN())
	a := dds.NewSampleArgs()
	a.NumRows = 5
	a.Logits = repeatRows(row1234(), 5)
	a.Temperatures = []float32{nan, -1, 1, 0, 1}
	a.TopKs = []int32{0, 0, -3, 0, 0}
	a.TopPs = []float32{1, 1, 1, nan, 1}
	a.MinPs = []float32{0, 0, 0, 0, -0.5}
	a.GuidanceScales = []float32{0, 0, 0, 0, float32(math.Inf(1))}
	a.UncondLogits = repeatRows(row1234(), 5)
	a.Tokens = make([]int32, 5)
	a.RequestStatus = fillI(5, -9)
	if err := s.Sample(&a); err != nil {
		t.Fatal(err)
	}
	want := []int32{dds.ReqBadTemperature, dds.ReqBadTemperature, dds.ReqBadTopK, dds.ReqBadTopP,
		dds.ReqBadMinP | dds.ReqBadGuidance}
	for r := range want {
		if a.RequestStatus[r] != want[r] {
			t.Errorf("request %d status %d, want %d", r, a.RequestStatus[r], want[r])
		}
	}
	if a.Tokens[3] != 3 {
		t.Errorf("T = 0 request sampled %d, want the argmax 3", a.Tokens[3])
	}
	// Debug mode returns the same condition as ErrInvalidValue naming the request.
	d := newSampler(t, dds.Config{VocabSize: 4, Flags: dds.FlagDebugChecks})
	err := d.Sample(&a)
	var e *dds.Error
	if !errors.As(err, &e) || e.Code != dds.ErrInvalidValue || !strings.Contains(e.Message, "temperatures[0]") {
		t.Errorf("debug mode: %v", err)
	}
}

func TestPositionsAndBatchInvariance(t *testing.T) {
	const v = 50
	rng := rand.New(rand.NewSource(17))
	s := newSampler(t, dds.Config{VocabSize: v})
	canvas := randomRow(rng, 12*v, 2) // one request's 12 canvas positions
	full := dds.NewSampleArgs()
	full.NumRows, full.Logits, full.RowOffsets, full.Seed, full.Step = 12, canvas, []int32{0, 12}, 5, 9
	full.Tokens = make([]int32, 12)
	if err := s.Sample(&full); err != nil {
		t.Fatal(err)
	}
	// Only the masked positions 2, 3, 7, 11, packed after another request's rows.
	masked := []int32{2, 3, 7, 11}
	other := randomRow(rng, 3*v, 2)
	logits := append([]float32(nil), other...)
	for _, p := range masked {
		logits = append(logits, canvas[int(p)*v:int(p+1)*v]...)
	}
	a := dds.NewSampleArgs()
	a.NumRows = 7
	a.RowOffsets = []int32{0, 3, 7}
	a.Positions = append([]int32{0, 1, 2}, masked...)
	a.Logits = logits
	a.Seeds = []uint64{1234, 5}
	a.Steps = []uint32{0, 9}
	a.Tokens = make([]int32, 7)
	if err := s.Sample(&a); err != nil {
		t.Fatal(err)
	}
	for k, p := range masked {
		if a.Tokens[3+k] != full.Tokens[p] {
			t.Errorf("position %d: packed %d, full canvas %d", p, a.Tokens[3+k], full.Tokens[p])
		}
	}
}

func TestStash(t *testing.T) {
	const v = 10
	s := newSampler(t, dds.Config{VocabSize: v, MaxStashWidth: 4})
	row := []float32{0.5, 2, -1, 2, 1.5, 0, negInf, 1, -3, 0.25}
	// Request 0: 2 rows, top-3; request 1: 1 row, not kept; request 2: 2 rows, own ids, slot 0,
	// one valid row.
	logits := repeatRows(row, 5)
	const numTop, slots, rps = 3, 3, 2
	a := dds.NewStashArgs()
	a.NumRows = 5
	a.RowOffsets = []int32{0, 2, 3, 5}
	a.Logits = logits
	a.NumTop = numTop
	a.NumSlots, a.RowsPerSlot = slots, rps
	a.Keep = []uint8{1, 0, 1}
	a.Slots = []int32{2, 1, 0}
	a.NumValid = []int32{2, 1, 1}
	a.Temperatures = []float32{1, 1, 2}
	a.CommittedTokens = []int32{-1, 4, 0, 8, 0}
	a.CommittedTokens[0] = 7
	a.TokenIDs = []int32{0, 0, 0, 0, 0, 0, 9, 3, 0}
	a.NumTokenIDs = []int32{0, 0, 2}
	size := slots * rps * (numTop + 1)
	a.OutTokenIDs, a.OutLogprobs, a.OutRanks = fillI(size, -7), fillF(size, 12345), fillI(size, -9)
	a.RequestStatus = fillI(3, -1)
	if err := s.StashLogprobs(&a); err != nil {
		t.Fatal(err)
	}
	at := func(slot, j, e int) int { return (slot*rps+j)*(numTop+1) + e }
	lp := func(T float32) []float64 {
		x := make([]float32, v)
		for i := range row {
			x[i] = row[i] / T
		}
		p := refSoftmax(x, nil)
		out := make([]float64, v)
		for i := range p {
			out[i] = math.Log(p[i])
		}
		return out
	}
	l1, l2 := lp(1), lp(2)
	check := func(slot, j, e int, id int32, want float64, rank int32) {
		t.Helper()
		i := at(slot, j, e)
		if a.OutTokenIDs[i] != id || a.OutRanks[i] != rank || !closeTo(a.OutLogprobs[i], want, 2e-6, 1e-7) {
			t.Errorf("slot %d row %d entry %d: (%d, %g, %d), want (%d, %g, %d)", slot, j, e,
				a.OutTokenIDs[i], a.OutLogprobs[i], a.OutRanks[i], id, want, rank)
		}
	}
	// Request 0 in slot 2: entry 0 the committed token (7, then 4), then top-3: 1, 3 (tie), 4.
	check(2, 0, 0, 7, l1[7], 4)
	check(2, 1, 0, 4, l1[4], 3)
	for j := 0; j < 2; j++ {
		check(2, j, 1, 1, l1[1], 1)
		check(2, j, 2, 3, l1[3], 1)
		check(2, j, 3, 4, l1[4], 3)
	}
	// Request 2 in slot 0, one valid row: entry 0 committed 8, own ids 9, 3, then padding.
	check(0, 0, 0, 8, l2[8], 9)
	check(0, 0, 1, 9, l2[9], 6)
	check(0, 0, 2, 3, l2[3], 1)
	check(0, 0, 3, 0, math.Inf(-1), 0)
	// Untouched: slot 1 (request 1 not kept) and slot 0 row 1 (beyond num_valid).
	for e := 0; e <= numTop; e++ {
		for _, i := range []int{at(1, 0, e), at(1, 1, e), at(0, 1, e)} {
			if a.OutTokenIDs[i] != -7 || a.OutLogprobs[i] != 12345 || a.OutRanks[i] != -9 {
				t.Fatalf("element %d written", i)
			}
		}
	}
	// Logits mode writes l / T.
	b := a
	b.Mode = dds.StashModeLogits
	b.OutLogprobs = fillF(size, 12345)
	b.OutTokenIDs, b.OutRanks = nil, nil
	if err := s.StashLogprobs(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.OutLogprobs[at(0, 0, 1)]; got != row[9]/2 {
		t.Errorf("logits mode: %g, want %g", got, row[9]/2)
	}
	if got := b.OutLogprobs[at(2, 0, 1)]; got != row[1] {
		t.Errorf("logits mode: %g, want %g", got, row[1])
	}
	// Committed tokens outside [0, V) are written as given, with -inf and rank 0.
	q := newSampler(t, dds.Config{VocabSize: 4})
	c := dds.NewStashArgs()
	c.NumRows, c.Logits, c.NumTop, c.NumSlots, c.RowsPerSlot = 2, repeatRows(row1234(), 2), 2, 2, 1
	c.CommittedTokens = []int32{1000, -5}
	c.OutTokenIDs, c.OutLogprobs, c.OutRanks = fillI(6, -7), fillF(6, 12345), fillI(6, -9)
	if err := q.StashLogprobs(&c); err != nil {
		t.Fatal(err)
	}
	wantIDs, wantRanks := []int32{1000, 3, 2, -5, 3, 2}, []int32{0, 1, 2, 0, 1, 2}
	for i := range wantIDs {
		if c.OutTokenIDs[i] != wantIDs[i] || c.OutRanks[i] != wantRanks[i] ||
			(i%3 == 0) != math.IsInf(float64(c.OutLogprobs[i]), -1) {
			t.Fatalf("out-of-range committed tokens: %v %v %v", c.OutTokenIDs, c.OutLogprobs, c.OutRanks)
		}
	}
}
