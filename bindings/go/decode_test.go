package dds_test

import (
	"errors"
	"math"
	"testing"

	dds "github.com/dds/dds/bindings/go"
)

func TestRevealPolicies(t *testing.T) {
	s := newSampler(t, dds.Config{VocabSize: 16})
	// Request 0: TOP_N 2 over 5 rows (a tie at 0.8 broken by the lower position);
	// request 1: THRESHOLD 0.5 over 3 rows; request 2: THRESHOLD 0.99 (still reveals the best);
	// request 3: an unknown policy (flagged, TOP_N used).
	a := dds.NewRevealArgs()
	a.NumRows = 12
	a.RowOffsets = []int32{0, 5, 8, 10, 12}
	a.Positions = []int32{9, 4, 7, 2, 5, 0, 1, 2, 3, 1, 0, 1}
	a.Scores = []float32{0.1, 0.8, 0.3, 0.8, 0.7, 0.6, 0.2, 0.55, 0.4, 0.9, 0.3, 0.35}
	a.Policies = []int32{int32(dds.RevealTopN), int32(dds.RevealThreshold),
		int32(dds.RevealThreshold), 9}
	a.Counts = []int32{2, 0, 0, 1}
	a.Thresholds = []float32{0, 0.5, 0.99, 0}
	a.Reveal = make([]uint8, 12)
	a.NumRevealed = fillI(4, -1)
	a.RequestStatus = fillI(4, -1)
	if err := s.Reveal(&a); err != nil {
		t.Fatal(err)
	}
	want := []uint8{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}
	for i := range want {
		if a.Reveal[i] != want[i] {
			t.Fatalf("reveal %v, want %v", a.Reveal, want)
		}
	}
	if a.NumRevealed[0] != 2 || a.NumRevealed[1] != 2 || a.NumRevealed[2] != 1 ||
		a.NumRevealed[3] != 1 || a.RequestStatus[3] != dds.ReqBadPolicy || a.RequestStatus[0] != 0 {
		t.Errorf("num_revealed %v status %v", a.NumRevealed, a.RequestStatus)
	}
}

func TestRevealCanvasEOS(t *testing.T) {
	const mask, eos = 9, 8
	s := newSampler(t, dds.Config{VocabSize: 10})
	// One canvas of 6 (stride 7): positions 1, 3 and 4 masked; EOS already at 5.
	canvas := []int32{1, mask, 2, mask, mask, eos, -5}
	a := dds.NewRevealArgs()
	a.NumRows = 3
	a.RowOffsets = []int32{0, 3}
	a.Positions = []int32{1, 3, 4}
	a.Scores = []float32{0.9, 0.5, 0.7}
	a.Tokens = []int32{4, 5, 6}
	a.Count = 0
	a.StepsLeft = []int32{1} // reveal all eligible rows
	a.Canvas, a.CanvasLength, a.CanvasStride = canvas, 6, 7
	a.MaskToken, a.EOSToken = mask, eos
	a.Reveal = make([]uint8, 3)
	a.Finished = []int32{-1}
	if err := s.Reveal(&a); err != nil {
		t.Fatal(err)
	}
	wantCanvas := []int32{1, 4, 2, 5, 6, eos, -5}
	for i := range wantCanvas {
		if canvas[i] != wantCanvas[i] {
			t.Fatalf("canvas %v, want %v", canvas, wantCanvas)
		}
	}
	if a.Finished[0] != 1 {
		t.Errorf("finished %d, want 1", a.Finished[0])
	}
	// Bad arguments: the library's and the binding's.
	b := a
	b.Scores = nil
	wantErr(t, s.Reveal(&b), dds.ErrNullPointer, "scores")
	b = a
	b.CanvasStride = 3
	wantErr(t, s.Reveal(&b), dds.ErrInvalidArgument, "canvas_stride")
	b = a
	b.Canvas = canvas[:5]
	wantErr(t, s.Reveal(&b), dds.ErrInvalidArgument, "args.Canvas has 5")
	b = a
	b.Reveal = make([]uint8, 2)
	wantErr(t, s.Reveal(&b), dds.ErrInvalidArgument, "args.Reveal has 2")
	wantErr(t, s.Reveal(&dds.RevealArgs{}), dds.ErrStructSize, "NewRevealArgs")
}

func oneHotRow(v, t int) []float32 {
	r := make([]float32, v)
	for i := range r {
		r[i] = -2
	}
	r[t] = 3
	return r
}

func TestVerifyDraftsGreedy(t *testing.T) {
	const v, n = 6, 3
	s := newSampler(t, dds.Config{VocabSize: v})
	var draft, target []float32
	// Request 0: target argmaxes 3 1 4 | 0; drafts 3 1 2: two accepted, then 4.
	// Request 1: drafts 3 1 4 all accepted, bonus 0. Request 2: 1 draft (draft_counts), rejected.
	for _, d := range [][]int{{3, 1, 2}, {3, 1, 4}, {5, 0, 0}} {
		for _, x := range d {
			draft = append(draft, oneHotRow(v, x)...)
		}
		for _, x := range []int{3, 1, 4, 0} {
			target = append(target, oneHotRow(v, x)...)
		}
	}
	a := dds.NewVerifyArgs()
	a.NumRequests, a.NumDrafts = 3, n
	a.DraftCounts = []int32{3, 3, 1}
	a.DraftTokens = []int32{3, 1, 2, 3, 1, 4, 5, 0, 0}
	a.DraftLogits, a.TargetLogits = draft, target
	a.Temperature = 0
	a.AcceptedCounts = fillI(3, -7)
	a.OutTokens = fillI(3*(n+1), -7)
	a.OutLogprobs = fillF(3*(n+1), 12345)
	if err := s.VerifyDrafts(&a); err != nil {
		t.Fatal(err)
	}
	wantAcc := []int32{2, 3, 0}
	wantTok := []int32{3, 1, 4, -1, 3, 1, 4, 0, 3, -1, -1, -1}
	for r := range wantAcc {
		if a.AcceptedCounts[r] != wantAcc[r] {
			t.Errorf("accepted %v, want %v", a.AcceptedCounts, wantAcc)
		}
	}
	for i := range wantTok {
		if a.OutTokens[i] != wantTok[i] {
			t.Fatalf("out tokens %v, want %v", a.OutTokens, wantTok)
		}
		if (wantTok[i] < 0) != math.IsInf(float64(a.OutLogprobs[i]), -1) {
			t.Fatalf("out logprobs %v", a.OutLogprobs)
		}
	}
	b := a
	b.OutTokens = make([]int32, 5)
	wantErr(t, s.VerifyDrafts(&b), dds.ErrInvalidArgument, "args.OutTokens has 5")
	b = a
	b.TargetLogits = nil
	wantErr(t, s.VerifyDrafts(&b), dds.ErrNullPointer, "target_logits")
	b = a
	b.NumDrafts = 2000
	wantErr(t, s.VerifyDrafts(&b), dds.ErrCapacity, "max_rows")
	b = a
	b.DraftLogits16, b.DraftLogits = make([]uint16, len(draft)), nil
	wantErr(t, s.VerifyDrafts(&b), dds.ErrInvalidArgument, "DraftLogits16")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyDrafts(&a); !errors.Is(err, dds.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	r := dds.NewRevealArgs()
	if err := s.Reveal(&r); !errors.Is(err, dds.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
