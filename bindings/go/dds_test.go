package dds_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"

	dds "github.com/dds/dds/bindings/go"
	"github.com/dds/dds/bindings/go/internal/cmem"
)

var negInf = float32(math.Inf(-1))

func newSampler(t testing.TB, cfg dds.Config) *dds.Sampler {
	t.Helper()
	s, err := dds.NewSampler(cfg)
	if err != nil {
		t.Fatalf("NewSampler(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func repeatRows(row []float32, n int) []float32 {
	out := make([]float32, 0, n*len(row))
	for i := 0; i < n; i++ {
		out = append(out, row...)
	}
	return out
}

// outputs holds every per-row output of a call, poisoned.
type outputs struct {
	tokens, argmax                        []int32
	logprobs, confidence, margin, entropy []float32
	probs                                 []float32
	status                                []int32
}

func newOutputs(rows, reqs, v int) *outputs {
	o := &outputs{
		tokens: fillI(rows, -7), argmax: fillI(rows, -7),
		logprobs: fillF(rows, 12345), confidence: fillF(rows, 12345), margin: fillF(rows, 12345),
		entropy: fillF(rows, 12345), probs: fillF(rows*v, 12345), status: fillI(reqs, -9),
	}
	return o
}

func (o *outputs) attach(a *dds.SampleArgs) {
	a.Tokens, a.Argmax, a.Logprobs, a.Confidence = o.tokens, o.argmax, o.logprobs, o.confidence
	a.Margin, a.Entropy, a.Probs, a.RequestStatus = o.margin, o.entropy, o.probs, o.status
}

func fillI(n int, v int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func fillF(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func closeTo(got float32, want float64, rel, abs float64) bool {
	if math.IsInf(want, 0) {
		return float64(got) == want
	}
	return math.Abs(float64(got)-want) <= abs+rel*math.Abs(want)
}

// run samples `rows` copies of row as one request, with every output.
func run(t *testing.T, s *dds.Sampler, row []float32, rows int, a dds.SampleArgs) *outputs {
	t.Helper()
	v := len(row)
	o := newOutputs(rows, 1, v)
	a.NumRows = rows
	a.NumRequests = 1
	a.RowOffsets = []int32{0, int32(rows)}
	a.Logits = repeatRows(row, rows)
	o.attach(&a)
	if err := s.Sample(&a); err != nil {
		t.Fatalf("Sample: %v", err)
	}
	return o
}

// checkStats checks row i's statistics and probs against the distribution d.
func checkStats(t *testing.T, o *outputs, i int, d []float64) {
	t.Helper()
	v := len(d)
	tok := int(o.tokens[i])
	if tok < 0 || tok >= v || d[tok] == 0 {
		t.Fatalf("row %d: token %d outside the support of %v", i, tok, d)
	}
	s := append([]float64(nil), d...)
	for a := 0; a < len(s); a++ {
		for b := a + 1; b < len(s); b++ {
			if s[b] > s[a] {
				s[a], s[b] = s[b], s[a]
			}
		}
	}
	p1, p2 := s[0], 0.0
	if len(s) > 1 {
		p2 = s[1]
	}
	ent := 0.0
	for _, p := range d {
		if p > 0 {
			ent -= p * math.Log(p)
		}
	}
	check := func(name string, got float32, want float64, rel, abs float64) {
		if !closeTo(got, want, rel, abs) {
			t.Errorf("row %d: %s = %.9g, want %.9g", i, name, got, want)
		}
	}
	check("logprob", o.logprobs[i], math.Log(d[tok]), 2e-6, 1e-7)
	check("confidence", o.confidence[i], p1, 2e-6, 1e-7)
	check("margin", o.margin[i], p1-p2, 2e-6, 2e-7)
	check("entropy", o.entropy[i], ent, 2e-6, 2e-7)
	for x := 0; x < v; x++ {
		got := o.probs[i*v+x]
		if d[x] == 0 {
			if got != 0 {
				t.Errorf("row %d: probs[%d] = %g, want 0", i, x, got)
			}
		} else {
			check(fmt.Sprintf("probs[%d]", x), got, d[x], 2e-6, 1e-7)
		}
	}
}

func row1234() []float32 {
	return []float32{0, float32(math.Log(2)), float32(math.Log(3)), float32(math.Log(4))}
}

func TestVersion(t *testing.T) {
	if dds.VersionNumber() != dds.HeaderVersionNumber {
		t.Errorf("library version %d != header version %d", dds.VersionNumber(),
			dds.HeaderVersionNumber)
	}
	if want := fmt.Sprintf("%d.%d.%d", dds.HeaderVersionNumber/1000000,
		dds.HeaderVersionNumber/1000%1000, dds.HeaderVersionNumber%1000); dds.VersionString() != want {
		t.Errorf("VersionString %q, want %q", dds.VersionString(), want)
	}
	if dds.ErrCapacity.String() != "DDS_ERR_CAPACITY" || dds.StatusOK.String() != "DDS_OK" ||
		dds.Status(999).String() != "DDS_UNKNOWN_STATUS" {
		t.Errorf("status strings: %v %v %v", dds.ErrCapacity, dds.StatusOK, dds.Status(999))
	}
	t.Logf("libdds %s, CUDA backend built: %v", dds.VersionString(), dds.HasCUDA())
}

func TestPhiloxKnownAnswers(t *testing.T) {
	cases := []struct{ ctr, key, out []uint32 }{
		{[]uint32{0, 0, 0, 0}, []uint32{0, 0}, []uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, []uint32{^uint32(0), ^uint32(0)},
			[]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, []uint32{0xa4093822, 0x299f31d0},
			[]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		got := philox4x32([4]uint32{c.ctr[0], c.ctr[1], c.ctr[2], c.ctr[3]}, [2]uint32{c.key[0], c.key[1]})
		for i := range got {
			if got[i] != c.out[i] {
				t.Fatalf("philox(%x, %x) = %x, want %x", c.ctr, c.key, got, c.out)
			}
		}
	}
	if b := randomBits(0x2a, 7, 3, 5, saltToken); b != 0x3dfbc579552e03f0 {
		t.Errorf("random_bits = %x", b)
	}
}

func pinnedRow(v int) []float32 {
	if v == 8 {
		return []float32{0.5, -1, 2, 0, 1.5, -0.25, 1, 0.75}
	}
	r := make([]float32, v)
	for i := range r {
		r[i] = float32(2*math.Sin(float64(i)*0.37) - float64(i)*0.001)
	}
	return r
}

// The pinned tokens of tests/cpu/test_rng.cpp, through the Go API, and through the Go reference.
func TestPinnedTokens(t *testing.T) {
	cases := []struct {
		v    int
		seed uint64
		step uint32
		want []int32
	}{
		{8, 12345, 3, []int32{2, 4, 3, 6, 4, 2, 6, 2, 4, 0, 3, 7, 4, 0, 2, 2}},
		{8, 0xdeadbeefcafef00d, 0, []int32{5, 0, 6, 7, 2, 2, 0, 2, 2, 0, 2, 4, 2, 2, 4, 0}},
		{3000, 12345, 3, []int32{531, 37, 243, 1941, 922, 582, 860, 107, 990, 772, 667, 702, 2485,
			1803, 326, 407}},
		{3000, 0xdeadbeefcafef00d, 0, []int32{226, 1959, 1261, 125, 1190, 91, 1225, 817, 1089,
			1175, 802, 2536, 1210, 428, 858, 854}},
	}
	for _, c := range cases {
		s := newSampler(t, dds.Config{VocabSize: c.v})
		a := dds.NewSampleArgs()
		a.Seed, a.Step = c.seed, c.step
		o := run(t, s, pinnedRow(c.v), 16, a)
		for j, want := range c.want {
			if o.tokens[j] != want {
				t.Errorf("V=%d seed=%x: tokens %v, want %v", c.v, c.seed, o.tokens, c.want)
				break
			}
			ref := refSample(pinnedRow(c.v), refParams{T: 1, P: 1, Seed: c.seed, Step: c.step,
				Position: uint32(j)})
			if int32(ref) != want {
				t.Errorf("Go reference: V=%d pos %d token %d, want %d", c.v, j, ref, want)
			}
		}
	}
}

func randomRow(rng *rand.Rand, v int, sigma float64) []float32 {
	r := make([]float32, v)
	for i := range r {
		r[i] = float32(rng.NormFloat64() * sigma)
	}
	return r
}

// Random rows with random filters and temperatures, per-request arrays, compared token by token
// with the Go reference.
func TestMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(2024))
	for _, v := range []int{1, 7, 1024, 1025, 2500} {
		s := newSampler(t, dds.Config{VocabSize: v})
		const reqs, per = 12, 5
		n := reqs * per
		var logits []float32
		for i := 0; i < n; i++ {
			r := randomRow(rng, v, 3)
			for x := 0; x < v; x += 5 {
				if v > 1 {
					r[x] = negInf
				}
			}
			if v > 2048 {
				for x := 1024; x < 2048; x++ {
					r[x] = negInf
				}
			}
			logits = append(logits, r...)
		}
		a := dds.NewSampleArgs()
		a.NumRows, a.NumRequests = n, reqs
		a.Logits = logits
		a.RowOffsets = make([]int32, reqs+1)
		a.Positions = make([]int32, n)
		a.Temperatures = make([]float32, reqs)
		a.TopKs = make([]int32, reqs)
		a.TopPs = make([]float32, reqs)
		a.MinPs = make([]float32, reqs)
		a.Seeds = make([]uint64, reqs)
		a.Steps = make([]uint32, reqs)
		for r := 0; r < reqs; r++ {
			a.RowOffsets[r+1] = int32((r + 1) * per)
			a.Temperatures[r] = []float32{1, 0.7, 1.5, 0}[r%4]
			a.TopKs[r] = []int32{0, 1, 5, 50}[r%4]
			a.TopPs[r] = []float32{1, 0.9, 0.5}[r%3]
			a.MinPs[r] = []float32{0, 0.05}[r%2]
			a.Seeds[r] = rng.Uint64()
			a.Steps[r] = rng.Uint32()
		}
		for i := range a.Positions {
			a.Positions[i] = int32(rng.Intn(100000))
		}
		a.Tokens = fillI(n, -7)
		if err := s.Sample(&a); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			r := i / per
			q := refParams{T: a.Temperatures[r], K: int(a.TopKs[r]), P: a.TopPs[r], MinP: a.MinPs[r],
				Seed: a.Seeds[r], Step: a.Steps[r], Position: uint32(a.Positions[i])}
			if want := refSample(logits[i*v:(i+1)*v], q); int32(want) != a.Tokens[i] {
				t.Errorf("V=%d row %d (%+v): token %d, reference %d", v, i, q, a.Tokens[i], want)
			}
		}
	}
}

func TestPlainStats(t *testing.T) {
	s := newSampler(t, dds.Config{VocabSize: 4})
	o := run(t, s, row1234(), 64, dds.NewSampleArgs())
	d := []float64{0.1, 0.2, 0.3, 0.4}
	seen := map[int32]int{}
	for i := 0; i < 64; i++ {
		checkStats(t, o, i, d)
		if o.argmax[i] != 3 {
			t.Errorf("argmax %d", o.argmax[i])
		}
		seen[o.tokens[i]]++
	}
	if len(seen) != 4 {
		t.Errorf("64 draws of 0.1..0.4 hit %v", seen)
	}
	if !closeTo(o.entropy[0], 1.2798542258336676, 2e-6, 0) || o.status[0] != 0 {
		t.Errorf("entropy %g status %d", o.entropy[0], o.status[0])
	}
}

func TestGreedy(t *testing.T) {
	s := newSampler(t, dds.Config{VocabSize: 5})
	row := []float32{1, 3, negInf, 3, 2}
	a := dds.NewSampleArgs()
	a.Temperature = 0
	o := run(t, s, row, 8, a)
	for i := 0; i < 8; i++ {
		if o.tokens[i] != 1 || o.argmax[i] != 1 {
			t.Fatalf("greedy token %d argmax %d, want 1 (ties to the lower id)", o.tokens[i], o.argmax[i])
		}
		checkStats(t, o, i, []float64{0, 1, 0, 0, 0})
		if o.logprobs[i] != 0 || o.confidence[i] != 1 || o.margin[i] != 1 || o.entropy[i] != 0 {
			t.Errorf("processed greedy stats not one-hot")
		}
	}
	a.Stats = dds.StatsGuided
	g := run(t, s, row, 2, a)
	d := refSoftmax(row, nil)
	for i := 0; i < 2; i++ {
		checkStats(t, g, i, d)
		if g.margin[i] != 0 {
			t.Errorf("guided margin with a tie at the top = %g", g.margin[i])
		}
	}
}

func TestTemperature(t *testing.T) {
	s := newSampler(t, dds.Config{VocabSize: 4})
	a := dds.NewSampleArgs()
	a.Temperature = 0.5
	r := run(t, s, row1234(), 32, a)
	for i := 0; i < 32; i++ {
		checkStats(t, r, i, []float64{1.0 / 30, 4.0 / 30, 9.0 / 30, 16.0 / 30})
	}
	a.Stats = dds.StatsGuided
	g := run(t, s, row1234(), 32, a)
	for i := 0; i < 32; i++ {
		checkStats(t, g, i, []float64{0.1, 0.2, 0.3, 0.4})
		if g.tokens[i] != r.tokens[i] {
			t.Errorf("the sample depends on the stats mode")
		}
	}
}

// Filters: the processed probs are exactly the reference's kept set, renormalised.
func TestFilters(t *testing.T) {
	row := []float32{0.5, 2, -1, 2, 1.5, 0, negInf, 1}
	v := len(row)
	s := newSampler(t, dds.Config{VocabSize: v})
	type filt struct {
		k       int32
		p, minP float32
	}
	for _, f := range []filt{{1, 1, 0}, {2, 1, 0}, {3, 1, 0}, {100, 1, 0}, {0, 1e-6, 0}, {0, 0, 0},
		{0, -1, 0}, {0, 0.5, 0}, {0, 0.8, 0}, {0, 1, 0.3}, {0, 1, 2}, {4, 0.9, 0.5}} {
		a := dds.NewSampleArgs()
		a.TopK, a.TopP, a.MinP, a.Seed = f.k, f.p, f.minP, 77
		o := run(t, s, row, 40, a)
		_, keep, _ := refKept(row, refParams{T: 1, K: int(f.k), P: f.p, MinP: f.minP})
		d := refSoftmax(row, keep)
		for i := 0; i < 40; i++ {
			checkStats(t, o, i, d)
		}
		if t.Failed() {
			t.Fatalf("filter %+v: kept %v", f, keep)
		}
	}
	// top-k ties at the boundary: ids 1 and 3 tie at 2; k = 1 keeps id 1.
	a := dds.NewSampleArgs()
	a.TopK = 1
	o := run(t, s, row, 16, a)
	for i := 0; i < 16; i++ {
		if o.tokens[i] != 1 {
			t.Fatalf("top-k 1 with a tie sampled %d, want 1", o.tokens[i])
		}
	}
}

func TestGuidanceMixedBatch(t *testing.T) {
	const v = 300
	rng := rand.New(rand.NewSource(7))
	s := newSampler(t, dds.Config{VocabSize: v})
	// Requests: 0 guided (3 rows), 1 unguided (2 rows), 2 guided (4 rows), 3 g = 0 (1 row).
	offs := []int32{0, 3, 5, 9, 10}
	n := 10
	cond := randomRow(rng, v*n, 2)
	cond[5], cond[v+7] = negInf, negInf
	// uncond holds rows only for the guided requests 0 and 2 (and 3, whose g is 0).
	uoffs := []int32{0, -1, 3, 7}
	uncond := randomRow(rng, v*8, 2)
	uncond[9] = negInf
	gs := []float32{1.5, 2, 0.75, 0}
	a := dds.NewSampleArgs()
	a.NumRows = n
	a.RowOffsets = offs
	a.Logits = cond
	a.UncondLogits = uncond
	a.UncondRowOffsets = uoffs
	a.GuidanceScales = gs
	a.Seed = 99
	a.Stats = dds.StatsGuided
	o := newOutputs(n, 4, v)
	o.attach(&a)
	if err := s.Sample(&a); err != nil {
		t.Fatal(err)
	}
	// The same rows with the guided logits computed here, no guidance in the call.
	var guided []float32
	for r := 0; r < 4; r++ {
		for i := offs[r]; i < offs[r+1]; i++ {
			c := cond[int(i)*v : int(i+1)*v]
			var u []float32
			isGuided := uoffs[r] >= 0 && gs[r] != 0
			if isGuided {
				j := int(uoffs[r]) + int(i-offs[r])
				u = uncond[j*v : (j+1)*v]
			}
			l := guide(c, u, gs[r], isGuided, -1)
			if i == 0 && (!math.IsInf(float64(l[5]), -1) || !math.IsInf(float64(l[9]), -1)) {
				t.Fatalf("reference: -inf in c or u must give -inf")
			}
			guided = append(guided, l...)
			checkStats(t, o, int(i), refSoftmax(l, nil))
		}
	}
	b := dds.NewSampleArgs()
	b.NumRows = n
	b.RowOffsets = offs
	b.Logits = guided
	b.Seed = 99
	p := newOutputs(n, 4, v)
	p.attach(&b)
	if err := s.Sample(&b); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if o.tokens[i] != p.tokens[i] {
			t.Errorf("row %d: guided call token %d, precomputed guidance %d", i, o.tokens[i], p.tokens[i])
		}
	}
	for r, st := range o.status {
		if st != 0 {
			t.Errorf("request %d status %d", r, st)
		}
	}
	// Request 2 alone gives the same tokens (batch invariance; positions = row index in request).
	c := dds.NewSampleArgs()
	c.NumRows = 4
	c.Logits = cond[5*v : 9*v]
	c.RowOffsets = []int32{0, 4}
	c.UncondLogits = uncond[3*v : 7*v]
	c.GuidanceScale = 0.75
	c.Seed = 99
	c.Tokens = make([]int32, 4)
	if err := s.Sample(&c); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 4; j++ {
		if c.Tokens[j] != o.tokens[5+j] {
			t.Errorf("request 2 alone: row %d token %d, in the batch %d", j, c.Tokens[j], o.tokens[5+j])
		}
	}
	// uncond rows out of range: unguided and flagged.
	d := dds.NewSampleArgs()
	d.NumRows = 3
	d.Logits = cond[:3*v]
	d.RowOffsets = []int32{0, 3}
	d.UncondLogits = uncond[:2*v]
	d.UncondRowOffsets = []int32{0}
	d.GuidanceScale = 1
	d.Tokens = make([]int32, 3)
	d.RequestStatus = []int32{0}
	if err := s.Sample(&d); err != nil {
		t.Fatal(err)
	}
	if d.RequestStatus[0] != dds.ReqBadUncondRows {
		t.Errorf("status %d, want ReqBadUncondRows", d.RequestStatus[0])
	}
}

func TestBanInfNaNEmpty(t *testing.T) {
	nan := float32(math.NaN())
	row := []float32{3, nan, 1, float32(math.Inf(1)), 0.5, negInf}
	s := newSampler(t, dds.Config{VocabSize: len(row)})
	a := dds.NewSampleArgs()
	a.BannedToken = 3 // the +inf column
	o := run(t, s, row, 32, a)
	d := refSoftmax(guide(row, nil, 0, false, 3), nil)
	for i := 0; i < 32; i++ {
		checkStats(t, o, i, d)
	}
	empty := []float32{negInf, negInf, nan, 2, negInf, negInf}
	a.BannedToken = 3
	e := run(t, s, empty, 2, a)
	if e.tokens[0] != 0 || e.argmax[0] != 0 || !math.IsInf(float64(e.logprobs[0]), -1) ||
		e.confidence[0] != 0 || e.entropy[0] != 0 || e.status[0] != dds.ReqEmptyRow {
		t.Errorf("empty row: token %d argmax %d logprob %g conf %g ent %g status %d", e.tokens[0],
			e.argmax[0], e.logprobs[0], e.confidence[0], e.entropy[0], e.status[0])
	}
}

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

func wantErr(t *testing.T, err error, code dds.Status, substr string) {
	t.Helper()
	var e *dds.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *dds.Error %v", err, err, code)
	}
	if e.Code != code || !errors.Is(err, code) || !strings.Contains(e.Message, substr) {
		t.Fatalf("error %q, want code %v and a message naming %q", err, code, substr)
	}
}

func TestBadArguments(t *testing.T) {
	_, err := dds.NewSampler(dds.Config{})
	wantErr(t, err, dds.ErrInvalidArgument, "vocab_size")
	_, err = dds.NewSampler(dds.Config{VocabSize: 10, MaxStashWidth: 5000})
	wantErr(t, err, dds.ErrInvalidArgument, "max_stash_width")
	_, err = dds.NewSampler(dds.Config{VocabSize: 10, NumThreads: -1})
	wantErr(t, err, dds.ErrInvalidArgument, "num_threads")
	_, err = dds.NewSampler(dds.Config{VocabSize: 1 << 40})
	wantErr(t, err, dds.ErrInvalidArgument, "VocabSize")
	if !dds.HasCUDA() {
		_, err = dds.NewSampler(dds.Config{VocabSize: 10, Backend: dds.BackendCUDA})
		var e *dds.Error
		if !errors.As(err, &e) || (e.Code != dds.ErrUnsupported && e.Code != dds.ErrNoDevice) {
			t.Errorf("CUDA backend without CUDA: %v", err)
		}
	}

	const v = 8
	s := newSampler(t, dds.Config{VocabSize: v, MaxRows: 4, MaxRequests: 2})
	good := func() dds.SampleArgs {
		a := dds.NewSampleArgs()
		a.NumRows = 2
		a.Logits = make([]float32, 2*v)
		a.Tokens = make([]int32, 2)
		return a
	}
	a := good()
	if err := s.Sample(&a); err != nil {
		t.Fatalf("good args: %v", err)
	}
	// Checked by the library (its message).
	cases := []struct {
		edit   func(*dds.SampleArgs)
		code   dds.Status
		substr string
	}{
		{func(a *dds.SampleArgs) { a.RowStride = 3 }, dds.ErrInvalidArgument, "row_stride"},
		{func(a *dds.SampleArgs) { a.Logits = nil }, dds.ErrNullPointer, "logits"},
		{func(a *dds.SampleArgs) { a.NumRows, a.Logits, a.Tokens = 5, make([]float32, 5*v), make([]int32, 5) }, dds.ErrCapacity, "max_rows"},
		{func(a *dds.SampleArgs) { a.NumRows = -1 }, dds.ErrInvalidArgument, "num_rows"},
		{func(a *dds.SampleArgs) { a.BannedToken = v }, dds.ErrInvalidArgument, "banned_token"},
		{func(a *dds.SampleArgs) { a.Temperature = -1 }, dds.ErrInvalidArgument, "temperature"},
		{func(a *dds.SampleArgs) { a.TopK = -1 }, dds.ErrInvalidArgument, "top_k"},
		{func(a *dds.SampleArgs) { a.Stats = 7 }, dds.ErrInvalidArgument, "stats"},
		{func(a *dds.SampleArgs) { a.Tokens = nil }, dds.ErrNullPointer, "no output"},
		{func(a *dds.SampleArgs) { a.NumRequests = 3 }, dds.ErrCapacity, "max_requests"},
		{func(a *dds.SampleArgs) { a.UncondRowOffsets = []int32{0, 0} }, dds.ErrInvalidArgument, "uncond_logits is NULL"},
		{func(a *dds.SampleArgs) { a.Probs = make([]float32, 2*v); a.ProbsRowStride = 2 }, dds.ErrInvalidArgument, "probs_row_stride"},
		// Checked by the binding (Go slices): the message names the Go field.
		{func(a *dds.SampleArgs) { a.Tokens = make([]int32, 1) }, dds.ErrInvalidArgument, "args.Tokens has 1 elements, needs at least 2"},
		{func(a *dds.SampleArgs) { a.Logits = make([]float32, 2*v-1) }, dds.ErrInvalidArgument, "args.Logits has 15"},
		{func(a *dds.SampleArgs) { a.RowStride = 10 }, dds.ErrInvalidArgument, "(NumRows-1)*RowStride+V"},
		{func(a *dds.SampleArgs) { a.Temperatures = []float32{1} }, dds.ErrInvalidArgument, "args.Temperatures"},
		{func(a *dds.SampleArgs) { a.DType = dds.BF16 }, dds.ErrInvalidArgument, "args.Logits16"},
		{func(a *dds.SampleArgs) { a.Logits16 = make([]uint16, 2*v) }, dds.ErrInvalidArgument, "both set"},
		{func(a *dds.SampleArgs) { a.Probs16 = make([]uint16, 2*v) }, dds.ErrInvalidArgument, "ProbsDType is f32"},
		{func(a *dds.SampleArgs) { a.SampleParams = dds.SampleParams{NumRows: 2} }, dds.ErrStructSize, "NewSampleArgs"},
		{func(a *dds.SampleArgs) { a.NumRows = 1 << 33 }, dds.ErrInvalidArgument, "NumRows"},
	}
	for i, c := range cases {
		a := good()
		c.edit(&a)
		wantErr(t, s.Sample(&a), c.code, c.substr)
		_ = i
	}
	// Offsets are per-request values, not host errors (docs/sampling.md §1): a request whose
	// offsets break the rule owns no rows and is flagged.
	ro := good()
	ro.RowOffsets = []int32{0, 1}
	ro.RequestStatus = []int32{0}
	if err := s.Sample(&ro); err != nil {
		t.Fatalf("row_offsets {0, 1} for 2 rows: %v", err)
	}
	if ro.RequestStatus[0]&dds.ReqBadRowOffsets == 0 {
		t.Errorf("row_offsets {0, 1} for 2 rows: status %d, want ReqBadRowOffsets", ro.RequestStatus[0])
	}
	wantErr(t, s.Sample(nil), dds.ErrNullPointer, "args is nil")

	st := dds.NewStashArgs()
	st.NumRows = 2
	st.Logits = make([]float32, 2*v)
	st.NumSlots, st.RowsPerSlot, st.NumTop = 2, 1, 3
	st.OutTokenIDs = make([]int32, 8)
	if err := s.StashLogprobs(&st); err != nil {
		t.Fatalf("good stash: %v", err)
	}
	b := st
	b.NumTop = 25
	wantErr(t, s.StashLogprobs(&b), dds.ErrCapacity, "num_top")
	b = st
	b.NumSlots = 0
	wantErr(t, s.StashLogprobs(&b), dds.ErrInvalidArgument, "num_slots")
	b = st
	b.OutTokenIDs = make([]int32, 7)
	wantErr(t, s.StashLogprobs(&b), dds.ErrInvalidArgument, "args.OutTokenIDs has 7")
	b = st
	b.OutTokenIDs = nil
	wantErr(t, s.StashLogprobs(&b), dds.ErrNullPointer, "no output")
	b = st
	b.TokenIDs = make([]int32, 5)
	wantErr(t, s.StashLogprobs(&b), dds.ErrInvalidArgument, "NumRequests*NumTop")
	wantErr(t, s.StashLogprobs(&dds.StashArgs{}), dds.ErrStructSize, "NewStashArgs")

	// Raw pointers on the CPU backend: the library checks them.
	d := dds.NewDeviceSampleArgs()
	d.NumRows = 2
	wantErr(t, s.SampleDevice(&d, 0), dds.ErrNullPointer, "logits")

	// Error() carries both the code name and the message.
	err = s.Sample(&dds.SampleArgs{})
	if !strings.Contains(err.Error(), "DDS_ERR_STRUCT_SIZE") {
		t.Errorf("Error(): %q", err.Error())
	}
}

// SampleDevice / StashLogprobsDevice with C memory on the CPU backend equal the slice API.
func TestRawPointersOnCPU(t *testing.T) {
	const v, n = 100, 6
	rng := rand.New(rand.NewSource(21))
	s := newSampler(t, dds.Config{VocabSize: v})
	logits := randomRow(rng, n*v, 2)
	a := dds.NewSampleArgs()
	a.NumRows, a.Logits, a.Seed = n, logits, 3
	a.Tokens, a.Entropy = make([]int32, n), make([]float32, n)
	if err := s.Sample(&a); err != nil {
		t.Fatal(err)
	}
	cl, ct, ce := cmem.Alloc(4*n*v), cmem.Alloc(4*n), cmem.Alloc(4*n)
	defer cl.Free()
	defer ct.Free()
	defer ce.Free()
	copy(cl.Float32s(), logits)
	d := dds.NewDeviceSampleArgs()
	d.NumRows, d.Seed = n, 3
	d.Logits, d.Tokens, d.Entropy = cl.Addr(), ct.Addr(), ce.Addr()
	if err := s.SampleDevice(&d, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if ct.Int32s()[i] != a.Tokens[i] || ce.Float32s()[i] != a.Entropy[i] {
			t.Errorf("row %d: raw (%d, %g), slices (%d, %g)", i, ct.Int32s()[i], ce.Float32s()[i],
				a.Tokens[i], a.Entropy[i])
		}
	}
	st := dds.NewStashArgs()
	st.NumRows, st.Logits, st.NumTop, st.NumSlots, st.RowsPerSlot = n, logits, 5, n, 1
	st.OutTokenIDs = make([]int32, n*6)
	if err := s.StashLogprobs(&st); err != nil {
		t.Fatal(err)
	}
	co := cmem.Alloc(4 * n * 6)
	defer co.Free()
	ds := dds.NewDeviceStashArgs()
	ds.NumRows, ds.Logits, ds.NumTop, ds.NumSlots, ds.RowsPerSlot = n, cl.Addr(), 5, n, 1
	ds.OutTokenIDs = co.Addr()
	if err := s.StashLogprobsDevice(&ds, 0); err != nil {
		t.Fatal(err)
	}
	for i, id := range st.OutTokenIDs {
		if co.Int32s()[i] != id {
			t.Fatalf("stash raw %v, slices %v", co.Int32s(), st.OutTokenIDs)
		}
	}
}

func TestUseAfterClose(t *testing.T) {
	s, err := dds.NewSampler(dds.Config{VocabSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	a := dds.NewSampleArgs()
	a.NumRows, a.Logits, a.Tokens = 1, row1234(), make([]int32, 1)
	if err := s.Sample(&a); !errors.Is(err, dds.ErrClosed) {
		t.Errorf("Sample after Close: %v", err)
	}
	st := dds.NewStashArgs()
	if err := s.StashLogprobs(&st); !errors.Is(err, dds.ErrClosed) {
		t.Errorf("StashLogprobs after Close: %v", err)
	}
	d := dds.NewDeviceSampleArgs()
	if err := s.SampleDevice(&d, 0); !errors.Is(err, dds.ErrClosed) {
		t.Errorf("SampleDevice after Close: %v", err)
	}
	ds := dds.NewDeviceStashArgs()
	if err := s.StashLogprobsDevice(&ds, 0); !errors.Is(err, dds.ErrClosed) {
		t.Errorf("StashLogprobsDevice after Close: %v", err)
	}
}

// Samplers left to the finalizer are destroyed without a crash.
func TestFinalizer(t *testing.T) {
	for i := 0; i < 20; i++ {
		if _, err := dds.NewSampler(dds.Config{VocabSize: 1000, MaxRows: 64}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
}

// Several goroutines, each with its own sampler, get the same tokens as one sequential run;
// one shared sampler used from several goroutines is serialised (no DDS_ERR_BUSY).
func TestConcurrent(t *testing.T) {
	const v, n, workers, iters = 2000, 16, 8, 25
	rng := rand.New(rand.NewSource(42))
	logits := randomRow(rng, n*v, 3)
	sampleWith := func(s *dds.Sampler, step int) ([]int32, error) {
		a := dds.NewSampleArgs()
		a.NumRows, a.Logits, a.Seed, a.Step, a.TopK = n, logits, 8, uint32(step), 40
		a.Tokens = make([]int32, n)
		a.Probs = make([]float32, n*v)
		err := s.Sample(&a)
		return a.Tokens, err
	}
	ref := newSampler(t, dds.Config{VocabSize: v})
	want := make([][]int32, iters)
	for i := range want {
		var err error
		if want[i], err = sampleWith(ref, i); err != nil {
			t.Fatal(err)
		}
	}
	shared := newSampler(t, dds.Config{VocabSize: v})
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			own, err := dds.NewSampler(dds.Config{VocabSize: v})
			if err != nil {
				errs <- err
				return
			}
			defer own.Close()
			for i := 0; i < iters; i++ {
				step := (i + w) % iters
				for _, s := range []*dds.Sampler{own, shared} {
					got, err := sampleWith(s, step)
					if err != nil {
						errs <- err
						return
					}
					for j := range got {
						if got[j] != want[step][j] {
							errs <- fmt.Errorf("worker %d step %d row %d: %d, want %d", w, step, j,
								got[j], want[step][j])
							return
						}
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func BenchmarkSample(b *testing.B) {
	const v, n = 32000, 8
	s := newSampler(b, dds.Config{VocabSize: v})
	a := dds.NewSampleArgs()
	a.NumRows, a.Logits = n, randomRow(rand.New(rand.NewSource(1)), n*v, 2)
	a.Tokens = make([]int32, n)
	b.SetBytes(int64(4 * n * v))
	for i := 0; i < b.N; i++ {
		a.Step = uint32(i)
		if err := s.Sample(&a); err != nil {
			b.Fatal(err)
		}
	}
}
