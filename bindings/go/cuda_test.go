//go:build cuda

package dds_test

// GPU tests (build tag cuda): device memory from the CUDA runtime through cgo
// (internal/cudart), sampling on the CUDA backend with device pointers and a stream, results
// compared with the CPU backend on the same inputs. Skips, visibly, without a CUDA build of
// libdds or without a device. Built by prep-gpu.sh, run by gpu-test.sh.

import (
	"errors"
	"math"
	"math/rand"
	"testing"
	"unsafe"

	dds "github.com/dds/dds/bindings/go"
	"github.com/dds/dds/bindings/go/internal/cudart"
)

func requireGPU(t *testing.T) {
	t.Helper()
	if !dds.HasCUDA() {
		t.Skip("SKIP: the loaded libdds has no CUDA backend (point LD_LIBRARY_PATH at a CUDA build)")
	}
	n, err := cudart.DeviceCount()
	if err != nil || n == 0 {
		t.Skipf("SKIP: no CUDA device (%d devices, %v)", n, err)
	}
	t.Logf("device 0: %s", cudart.DeviceName(0))
}

// dev uploads a Go slice (nil -> 0) and frees it at the end of the test.
func dev[T any](t *testing.T, s []T) uintptr {
	t.Helper()
	if s == nil {
		return 0
	}
	var z T
	m, err := cudart.Malloc(len(s) * int(unsafe.Sizeof(z)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Free() })
	if err := cudart.Upload(m, s); err != nil {
		t.Fatal(err)
	}
	return m.Ptr()
}

// devOut allocates device memory for n elements of T, filled with the bytes 0xA5 (poison).
func devOut[T any](t *testing.T, n int) cudart.Mem {
	t.Helper()
	var z T
	m, err := cudart.Malloc(n * int(unsafe.Sizeof(z)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Free() })
	if err := m.Memset(0xA5); err != nil {
		t.Fatal(err)
	}
	return m
}

func download[T any](t *testing.T, m cudart.Mem, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := cudart.Download(out, m); err != nil {
		t.Fatal(err)
	}
	return out
}

type gpuCase struct {
	name              string
	v, rows, reqs     int
	dt                dds.DType
	guided, filtered  bool
	stats             dds.StatsMode
	probs             bool
	rowStride, uncond int
}

func buildArgs(rng *rand.Rand, c gpuCase) dds.SampleArgs {
	a := dds.NewSampleArgs()
	a.NumRows, a.NumRequests, a.Stats = c.rows, c.reqs, c.stats
	a.DType = c.dt
	stride := c.v + c.rowStride
	a.RowStride = stride
	a.RowOffsets = make([]int32, c.reqs+1)
	for r := 1; r < c.reqs; r++ {
		a.RowOffsets[r] = int32(r * c.rows / c.reqs)
	}
	a.RowOffsets[c.reqs] = int32(c.rows)
	a.Positions = make([]int32, c.rows)
	for i := range a.Positions {
		a.Positions[i] = int32(rng.Intn(1 << 20))
	}
	lg := randomRow(rng, c.rows*stride, 3)
	for i := 0; i < c.rows*stride; i += 11 {
		lg[i] = negInf
	}
	a.Logits, a.Logits16 = toDType(lg, c.dt)
	if c.dt != dds.F32 {
		a.Logits = nil
	}
	a.Temperatures = make([]float32, c.reqs)
	a.Seeds = make([]uint64, c.reqs)
	a.Steps = make([]uint32, c.reqs)
	for r := 0; r < c.reqs; r++ {
		a.Temperatures[r] = []float32{1, 0.7, 1.3, 0}[r%4]
		a.Seeds[r] = rng.Uint64()
		a.Steps[r] = rng.Uint32()
	}
	if c.filtered {
		a.TopKs = make([]int32, c.reqs)
		a.TopPs = make([]float32, c.reqs)
		a.MinPs = make([]float32, c.reqs)
		for r := 0; r < c.reqs; r++ {
			a.TopKs[r] = []int32{0, 1, 20, 0, 50}[r%5]
			a.TopPs[r] = []float32{1, 0.9, 1, 0.5, 0.95}[r%5]
			a.MinPs[r] = []float32{0, 0, 0.05, 0.1}[r%4]
		}
	}
	if c.guided {
		// Every other request guided; the uncond tensor holds only their rows.
		a.UncondRowOffsets = make([]int32, c.reqs)
		a.GuidanceScales = make([]float32, c.reqs)
		u := 0
		for r := 0; r < c.reqs; r++ {
			if r%2 == 0 {
				a.UncondRowOffsets[r] = int32(u)
				a.GuidanceScales[r] = 1.5
				u += int(a.RowOffsets[r+1] - a.RowOffsets[r])
			} else {
				a.UncondRowOffsets[r] = -1
			}
		}
		a.UncondNumRows = u
		a.UncondRowStride = c.v
		ul := randomRow(rng, u*c.v, 3)
		a.UncondLogits, a.UncondLogits16 = toDType(ul, c.dt)
		if c.dt != dds.F32 {
			a.UncondLogits = nil
		}
	}
	return a
}

func TestCUDAMatchesCPU(t *testing.T) {
	requireGPU(t)
	stream, err := cudart.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	rng := rand.New(rand.NewSource(77))
	cases := []gpuCase{
		{name: "V1", v: 1, rows: 3, reqs: 3},
		{name: "V7 filtered", v: 7, rows: 257, reqs: 31, filtered: true, probs: true},
		{name: "V1025 guided bf16", v: 1025, rows: 64, reqs: 9, dt: dds.BF16, guided: true, probs: true},
		{name: "V32001 mixed f16 stride", v: 32001, rows: 40, reqs: 7, dt: dds.F16, filtered: true,
			guided: true, rowStride: 7},
		{name: "V151936 guided stats", v: 151936, rows: 8, reqs: 8, guided: true, stats: dds.StatsGuided},
		{name: "V262144 filtered", v: 262144, rows: 6, reqs: 3, filtered: true, dt: dds.BF16},
	}
	totalRows, mismatches := 0, 0
	for _, c := range cases {
		a := buildArgs(rng, c)
		n := c.rows
		o := newOutputs(n, c.reqs, c.v)
		o.attach(&a)
		if !c.probs {
			a.Probs = nil
		}
		cpu := newSampler(t, dds.Config{VocabSize: c.v, MaxRows: n, MaxRequests: c.reqs})
		if err := cpu.Sample(&a); err != nil {
			t.Fatalf("%s: CPU: %v", c.name, err)
		}
		gpu := newSampler(t, dds.Config{Backend: dds.BackendCUDA, VocabSize: c.v, MaxRows: n,
			MaxRequests: c.reqs})
		// Go slices are refused on a CUDA sampler, with a hint.
		if err := gpu.Sample(&a); !errors.Is(err, dds.ErrInvalidArgument) {
			t.Errorf("Sample(Go slices) on the CUDA backend: %v", err)
		}
		d := dds.NewDeviceSampleArgs()
		d.SampleParams = a.SampleParams
		d.RowOffsets, d.Positions = dev(t, a.RowOffsets), dev(t, a.Positions)
		if c.dt == dds.F32 {
			d.Logits, d.UncondLogits = dev(t, a.Logits), dev(t, a.UncondLogits)
		} else {
			d.Logits, d.UncondLogits = dev(t, a.Logits16), dev(t, a.UncondLogits16)
		}
		d.UncondRowOffsets, d.GuidanceScales = dev(t, a.UncondRowOffsets), dev(t, a.GuidanceScales)
		d.Temperatures, d.TopKs = dev(t, a.Temperatures), dev(t, a.TopKs)
		d.TopPs, d.MinPs = dev(t, a.TopPs), dev(t, a.MinPs)
		d.Seeds, d.Steps = dev(t, a.Seeds), dev(t, a.Steps)
		tok, arg := devOut[int32](t, n), devOut[int32](t, n)
		lp, conf := devOut[float32](t, n), devOut[float32](t, n)
		mar, ent := devOut[float32](t, n), devOut[float32](t, n)
		st := devOut[int32](t, c.reqs)
		d.Tokens, d.Argmax, d.Logprobs, d.Confidence = tok.Ptr(), arg.Ptr(), lp.Ptr(), conf.Ptr()
		d.Margin, d.Entropy, d.RequestStatus = mar.Ptr(), ent.Ptr(), st.Ptr()
		var probs cudart.Mem
		if c.probs {
			probs = devOut[float32](t, n*c.v)
			d.Probs = probs.Ptr()
		}
		if err := gpu.SampleDevice(&d, stream.Handle()); err != nil {
			t.Fatalf("%s: SampleDevice: %v", c.name, err)
		}
		if err := stream.Sync(); err != nil {
			t.Fatal(err)
		}
		gTok, gArg := download[int32](t, tok, n), download[int32](t, arg, n)
		gLp, gConf := download[float32](t, lp, n), download[float32](t, conf, n)
		gMar, gEnt := download[float32](t, mar, n), download[float32](t, ent, n)
		gSt := download[int32](t, st, c.reqs)
		// As tests/gpu/test_gpu_sample.cu: argmax and flags exact; a row whose token or
		// statistics (1e-5 relative + 1e-6) differ is counted (near-ties), and only a few may.
		var gp []float32
		if c.probs {
			gp = download[float32](t, probs, n*c.v)
		}
		caseMis := 0
		for i := 0; i < n; i++ {
			if gArg[i] != o.argmax[i] {
				t.Errorf("%s row %d: argmax GPU %d CPU %d", c.name, i, gArg[i], o.argmax[i])
			}
			cl := func(g, w float32) bool { return closeTo(g, float64(w), 1e-5, 1e-6) }
			ok := gTok[i] == o.tokens[i] && cl(gLp[i], o.logprobs[i]) &&
				cl(gConf[i], o.confidence[i]) && cl(gMar[i], o.margin[i]) && cl(gEnt[i], o.entropy[i])
			for x := 0; ok && c.probs && x < c.v; x++ {
				ok = cl(gp[i*c.v+x], o.probs[i*c.v+x])
			}
			if !ok {
				caseMis++
				t.Logf("%s row %d: GPU token %d logprob %g conf %g margin %g entropy %g; "+
					"CPU %d %g %g %g %g", c.name, i, gTok[i], gLp[i], gConf[i], gMar[i], gEnt[i],
					o.tokens[i], o.logprobs[i], o.confidence[i], o.margin[i], o.entropy[i])
			}
		}
		for r := range gSt {
			if gSt[r] != o.status[r] {
				t.Errorf("%s request %d: status GPU %d CPU %d", c.name, r, gSt[r], o.status[r])
			}
		}
		t.Logf("%s: %d rows, %d differing rows", c.name, n, caseMis)
		totalRows += n
		mismatches += caseMis
	}
	// Rows may differ only where candidates tie within rounding: a handful at most.
	if mismatches*100 > totalRows {
		t.Errorf("%d of %d rows differ between GPU and CPU (more than 1%%)", mismatches, totalRows)
	}
	t.Logf("GPU vs CPU: %d rows, %d differing rows (near-ties)", totalRows, mismatches)
}

func TestCUDAStash(t *testing.T) {
	requireGPU(t)
	const v, n, reqs, top = 5000, 12, 4, 8
	rng := rand.New(rand.NewSource(5))
	a := dds.NewStashArgs()
	a.NumRows, a.NumRequests, a.NumTop = n, reqs, top
	a.RowOffsets = []int32{0, 3, 6, 9, 12}
	a.Logits = randomRow(rng, n*v, 2)
	a.Keep = []uint8{1, 0, 1, 1}
	a.Slots = []int32{3, 2, 1, 0}
	a.Temperatures = []float32{1, 1, 0.5, 2}
	a.TokenIDs = make([]int32, reqs*top)
	for i := range a.TokenIDs {
		a.TokenIDs[i] = int32(rng.Intn(v))
	}
	a.NumTokenIDs = []int32{0, 0, 5, 0}
	a.NumSlots, a.RowsPerSlot = 4, 3
	size := 4 * 3 * (top + 1)
	a.OutTokenIDs, a.OutLogprobs, a.OutRanks = fillI(size, -7), fillF(size, 12345), fillI(size, -9)
	cpu := newSampler(t, dds.Config{VocabSize: v, MaxStashWidth: top})
	if err := cpu.StashLogprobs(&a); err != nil {
		t.Fatal(err)
	}
	gpu := newSampler(t, dds.Config{Backend: dds.BackendCUDA, VocabSize: v, MaxStashWidth: top})
	d := dds.NewDeviceStashArgs()
	d.StashParams = a.StashParams
	d.RowOffsets, d.Logits, d.Keep = dev(t, a.RowOffsets), dev(t, a.Logits), dev(t, a.Keep)
	d.Slots, d.Temperatures = dev(t, a.Slots), dev(t, a.Temperatures)
	d.TokenIDs, d.NumTokenIDs = dev(t, a.TokenIDs), dev(t, a.NumTokenIDs)
	d.OutTokenIDs = dev(t, fillI(size, -7))
	d.OutLogprobs = dev(t, fillF(size, 12345))
	d.OutRanks = dev(t, fillI(size, -9))
	if err := gpu.StashLogprobsDevice(&d, 0); err != nil {
		t.Fatal(err)
	}
	if err := cudart.DeviceSynchronize(); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, size)
	lps := make([]float32, size)
	ranks := make([]int32, size)
	for _, x := range []struct {
		p   uintptr
		dst interface{}
	}{{d.OutTokenIDs, ids}, {d.OutLogprobs, lps}, {d.OutRanks, ranks}} {
		var err error
		switch dst := x.dst.(type) {
		case []int32:
			err = cudart.DownloadAt(dst, x.p)
		case []float32:
			err = cudart.DownloadAt(dst, x.p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < size; i++ {
		if ids[i] != a.OutTokenIDs[i] || ranks[i] != a.OutRanks[i] ||
			!(lps[i] == a.OutLogprobs[i] || closeTo(lps[i], float64(a.OutLogprobs[i]), 1e-5, 1e-6)) {
			t.Errorf("stash element %d: GPU (%d, %g, %d) CPU (%d, %g, %d)", i, ids[i], lps[i],
				ranks[i], a.OutTokenIDs[i], a.OutLogprobs[i], a.OutRanks[i])
		}
	}
	if math.IsNaN(float64(lps[0])) {
		t.Errorf("NaN in the stash")
	}
}

func TestCUDARevealAndVerify(t *testing.T) {
	requireGPU(t)
	const v = 64
	rng := rand.New(rand.NewSource(9))
	cpu := newSampler(t, dds.Config{VocabSize: v})
	gpu := newSampler(t, dds.Config{Backend: dds.BackendCUDA, VocabSize: v})
	// Reveal: 4 requests, mixed policies, with a canvas.
	const n, reqs, length = 40, 4, 16
	a := dds.NewRevealArgs()
	a.NumRows = n
	a.NumRequests = reqs // the device call cannot infer it from a device pointer
	a.RowOffsets = []int32{0, 10, 20, 30, 40}
	a.Positions = make([]int32, n)
	a.Scores = make([]float32, n)
	a.Tokens = make([]int32, n)
	for i := 0; i < n; i++ {
		a.Positions[i] = int32(i % 10)
		a.Scores[i] = float32(rng.Float64())
		a.Tokens[i] = int32(rng.Intn(v - 1))
	}
	a.Policies = []int32{int32(dds.RevealTopN), int32(dds.RevealThreshold), int32(dds.RevealFactor),
		int32(dds.RevealRandom)}
	a.Counts = []int32{3, 0, 0, 2}
	a.Thresholds = []float32{0, 0.6, 0, 0}
	a.Factors = []float32{0, 0, 0.9, 0}
	a.Seed, a.Step = 5, 2
	canvas := fillI(reqs*length, v-1)
	a.Canvas, a.CanvasLength, a.MaskToken = append([]int32(nil), canvas...), length, v-1
	a.Reveal = make([]uint8, n)
	a.NumRevealed = make([]int32, reqs)
	if err := cpu.Reveal(&a); err != nil {
		t.Fatal(err)
	}
	d := dds.NewDeviceRevealArgs()
	d.RevealParams = a.RevealParams
	d.RowOffsets, d.Positions, d.Scores = dev(t, a.RowOffsets), dev(t, a.Positions), dev(t, a.Scores)
	d.Tokens, d.Policies, d.Counts = dev(t, a.Tokens), dev(t, a.Policies), dev(t, a.Counts)
	d.Thresholds, d.Factors = dev(t, a.Thresholds), dev(t, a.Factors)
	d.Canvas = dev(t, canvas)
	rev, num := devOut[uint8](t, n), devOut[int32](t, reqs)
	d.Reveal, d.NumRevealed = rev.Ptr(), num.Ptr()
	if err := gpu.RevealDevice(&d, 0); err != nil {
		t.Fatal(err)
	}
	if err := cudart.DeviceSynchronize(); err != nil {
		t.Fatal(err)
	}
	gRev, gNum := download[uint8](t, rev, n), download[int32](t, num, reqs)
	gCanvas := make([]int32, reqs*length)
	if err := cudart.DownloadAt(gCanvas, d.Canvas); err != nil {
		t.Fatal(err)
	}
	for i := range gRev {
		if gRev[i] != a.Reveal[i] {
			t.Fatalf("reveal GPU %v CPU %v", gRev, a.Reveal)
		}
	}
	for i := range gCanvas {
		if gCanvas[i] != a.Canvas[i] || (i < reqs && gNum[i] != a.NumRevealed[i]) {
			t.Fatalf("canvas GPU %v CPU %v (num_revealed %v %v)", gCanvas, a.Canvas, gNum, a.NumRevealed)
		}
	}
	// Verify on the device (the CUDA kernel of kernels/verify.cuh).
	vd := dds.NewDeviceVerifyArgs()
	vd.NumRequests, vd.NumDrafts = 2, 2
	vd.DraftTokens = dev(t, []int32{1, 2, 3, 4})
	vd.DraftLogits = dev(t, randomRow(rng, 4*v, 2))
	vd.TargetLogits = dev(t, randomRow(rng, 6*v, 2))
	vd.AcceptedCounts = devOut[int32](t, 2).Ptr()
	vd.OutTokens = devOut[int32](t, 6).Ptr()
	err := gpu.VerifyDraftsDevice(&vd, 0)
	if err != nil {
		t.Errorf("VerifyDraftsDevice: %v", err)
	}
}
