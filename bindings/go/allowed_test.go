package dds_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	dds "github.com/dds/dds/bindings/go"
)

// packMasks packs allowed[r*v+t] into [requests rows of stride] int32 words (bit t%32 of word
// t/32).
func packMasks(allowed []bool, v, stride int) []int32 {
	m := make([]int32, len(allowed)/v*stride)
	for i, ok := range allowed {
		if ok {
			r, t := i/v, i%v
			m[r*stride+t/32] |= int32(uint32(1) << (t % 32))
		}
	}
	return m
}

// A masked call samples exactly what the call on logits with the disallowed columns at -inf
// samples (same random draws), for Sample, Stash and VerifyDrafts.
func TestAllowedTokenMasks(t *testing.T) {
	const v, rows = 50, 5
	s := newSampler(t, dds.Config{VocabSize: v})
	rng := rand.New(rand.NewSource(3))
	offs := []int32{0, 3, 5}
	x := make([]float32, rows*v)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 2)
	}
	allowed := make([]bool, 2*v)
	for i := range allowed {
		allowed[i] = rng.Intn(2) == 0
	}
	masks := packMasks(allowed, v, 2)
	xm := append([]float32(nil), x...)
	for i := 0; i < rows; i++ {
		r := 0
		if i >= 3 {
			r = 1
		}
		for c := 0; c < v; c++ {
			if !allowed[r*v+c] {
				xm[i*v+c] = float32(math.Inf(-1))
			}
		}
	}
	run := func(logits []float32, m []int32) ([]int32, []float32) {
		a := dds.NewSampleArgs()
		a.NumRows = rows
		a.RowOffsets = offs
		a.Logits = logits
		a.Seed = 17
		a.Temperature = 0.9
		a.AllowedTokenMasks = m
		a.Tokens = make([]int32, rows)
		a.Entropy = make([]float32, rows)
		if err := s.Sample(&a); err != nil {
			t.Fatal(err)
		}
		return a.Tokens, a.Entropy
	}
	tok, ent := run(x, masks)
	tokRef, entRef := run(xm, nil)
	for i := range tok {
		if tok[i] != tokRef[i] || ent[i] != entRef[i] {
			t.Fatalf("masked %v %v, -inf logits %v %v", tok, ent, tokRef, entRef)
		}
	}
	// A short mask slice is refused, naming it.
	a := dds.NewSampleArgs()
	a.NumRows = rows
	a.RowOffsets = offs
	a.Logits = x
	a.AllowedTokenMasks = masks[:3]
	a.Tokens = make([]int32, rows)
	if err := s.Sample(&a); err == nil || !strings.Contains(err.Error(), "AllowedTokenMasks") {
		t.Fatalf("short mask: %v", err)
	}

	stash := func(logits []float32, m []int32) []int32 {
		b := dds.NewStashArgs()
		b.NumRows = rows
		b.RowOffsets = offs
		b.Logits = logits
		b.NumTop = 4
		b.NumSlots = 2
		b.RowsPerSlot = 3
		b.AllowedTokenMasks = m
		b.OutTokenIDs = make([]int32, 2*3*5)
		if err := s.StashLogprobs(&b); err != nil {
			t.Fatal(err)
		}
		return b.OutTokenIDs
	}
	got, want := stash(x, masks), stash(xm, nil)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("stash masked %v, -inf logits %v", got, want)
		}
	}

	verify := func(target, draft []float32, m []int32, seed uint64) []int32 {
		c := dds.NewVerifyArgs()
		c.NumRequests = 1
		c.NumDrafts = 2
		c.DraftTokens = []int32{1, 2}
		c.DraftLogits = draft
		c.TargetLogits = target
		c.Seed = seed
		c.AllowedTokenMasks = m
		c.AcceptedCounts = make([]int32, 1)
		c.OutTokens = make([]int32, 3)
		if err := s.VerifyDrafts(&c); err != nil {
			t.Fatal(err)
		}
		return append(c.OutTokens, c.AcceptedCounts[0])
	}
	// One request: target rows 0-2 and draft rows 3-4 of x, masked with request 0's mask.
	tm := append([]float32(nil), x...)
	for i := 0; i < rows; i++ {
		for c := 0; c < v; c++ {
			if !allowed[c] {
				tm[i*v+c] = float32(math.Inf(-1))
			}
		}
	}
	for seed := uint64(0); seed < 8; seed++ {
		g := verify(x[:3*v], x[3*v:], masks[:2], seed)
		w := verify(tm[:3*v], tm[3*v:], nil, seed)
		for i := range g {
			if g[i] != w[i] {
				t.Fatalf("verify seed %d: masked %v, -inf logits %v", seed, g, w)
			}
		}
	}
}

func TestRevealEntropyBound(t *testing.T) {
	s := newSampler(t, dds.Config{VocabSize: 8})
	a := dds.NewRevealArgs()
	if a.EntropyBound != float32(0.1) {
		t.Fatalf("default EntropyBound %v", a.EntropyBound)
	}
	a.NumRows = 8
	a.RowOffsets = []int32{0, 5, 8}
	a.Scores = []float32{0.3, 0.1, 0.05, 0.5, float32(math.NaN()), 0.25, 0.25, 0.25}
	a.Policy = dds.RevealEntropyBound
	a.EntropyBounds = []float32{0.2, float32(math.NaN())}
	a.Reveal = make([]uint8, 8)
	a.RequestStatus = make([]int32, 2)
	if err := s.Reveal(&a); err != nil {
		t.Fatal(err)
	}
	want := []uint8{1, 1, 1, 0, 0, 1, 0, 0}
	for i := range want {
		if a.Reveal[i] != want[i] {
			t.Fatalf("reveal %v, want %v", a.Reveal, want)
		}
	}
	if a.RequestStatus[0] != 0 || a.RequestStatus[1] != dds.ReqBadEntropyBound {
		t.Fatalf("status %v", a.RequestStatus)
	}
}
