// Errors and lifetime through the Go binding: bad arguments, raw pointers on the CPU backend, use after
// Close, the finalizer, concurrent use; the sampling benchmark.

package dds_test

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"

	dds "github.com/dds/dds/bindings/go"
	"github.com/dds/dds/bindings/go/internal/cmem"
)

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
