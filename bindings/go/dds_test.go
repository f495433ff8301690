// Sampling through the Go binding on the CPU backend: known answers, tokens and statistics against
// the reference, greedy, temperature, filters, guidance, banned tokens; the shared test helpers.

package dds_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	dds "github.com/dds/dds/bindings/go"
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
