package dds

import (
	"math"
	"runtime"
	"unsafe"
)

// SampleParams are the host scalars of dds_sample_args, shared by SampleArgs (Go slices, CPU
// backend) and DeviceSampleArgs (raw pointers). Start from NewSampleArgs / NewDeviceSampleArgs.
type SampleParams struct {
	// NumRows is the number of rows in the call (0 is a no-op).
	NumRows int
	// NumRequests is the number of requests. 0 means: len(RowOffsets)-1 when RowOffsets is
	// set (Go slices only), else NumRows (one row per request).
	NumRequests int

	DType     DType // of Logits and UncondLogits. Default F32
	RowStride int   // elements between rows, >= V. 0 = V

	UncondRowStride int // 0 = V
	// UncondNumRows bounds the uncond row offsets. 0 with Go slices: as many rows as
	// UncondLogits holds.
	UncondNumRows int
	GuidanceScale float32 // default g (0 = off) when GuidanceScales is nil

	Temperature float32 // default T (1; 0 = greedy) when Temperatures is nil
	TopK        int32   // default k (0 = off)
	TopP        float32 // default p (1 = off)
	MinP        float32 // default min-p (0 = off)
	Seed        uint64  // default seed
	Step        uint32  // default step

	BannedToken int32     // token never sampled nor counted (the mask token), -1 = none
	Stats       StatsMode // distribution of the statistics outputs

	ProbsDType     DType // of Probs. Default F32
	ProbsRowStride int   // elements between probs rows, >= V. 0 = V

	// AllowedMaskStride: int32 words between requests' AllowedTokenMasks, >= ceil(V/32).
	// 0 = ceil(V/32)
	AllowedMaskStride int

	initialized bool
}

// SampleArgs mirrors dds_sample_args with Go slices, for the CPU backend. A nil slice is a NULL
// pointer (the scalar default, or "output not wanted"). Slices must hold at least the elements
// the call reads or writes (checked) and must not share an allocation with Go pointers.
//
// Logits are []float32 for DType F32, or bf16/f16 bit patterns in Logits16 for BF16/F16 (set
// exactly one); the same for UncondLogits/UncondLogits16 and Probs/Probs16 with ProbsDType.
type SampleArgs struct {
	SampleParams

	RowOffsets []int32 // [NumRequests+1], nil = one row per request
	Positions  []int32 // [NumRows] canvas positions, nil = index within the request

	Logits   []float32 // [NumRows rows of RowStride], DType F32
	Logits16 []uint16  // the same for DType BF16 / F16

	UncondLogits     []float32 // [UncondNumRows rows of UncondRowStride]
	UncondLogits16   []uint16
	UncondRowOffsets []int32   // [NumRequests] first uncond row of each request, -1 = unguided
	GuidanceScales   []float32 // [NumRequests]

	Temperatures []float32 // [NumRequests]
	TopKs        []int32   // [NumRequests]
	TopPs        []float32 // [NumRequests]
	MinPs        []float32 // [NumRequests]
	Seeds        []uint64  // [NumRequests]
	Steps        []uint32  // [NumRequests]

	// Outputs, [NumRows] each unless said.
	Tokens        []int32
	Logprobs      []float32
	Argmax        []int32
	Confidence    []float32
	Margin        []float32
	Entropy       []float32
	Probs         []float32 // [NumRows rows of ProbsRowStride], ProbsDType F32
	Probs16       []uint16  // the same for ProbsDType BF16 / F16
	RequestStatus []int32   // [NumRequests] ReqBad* bits

	// AllowedTokenMasks: [NumRequests rows of AllowedMaskStride] packed bitmasks, token t of
	// request r allowed when bit t%32 of word t/32 of its row is set (xgrammar's layout); a
	// disallowed token is -inf like BannedToken. nil = every token allowed.
	AllowedTokenMasks []int32
}

// DeviceSampleArgs mirrors dds_sample_args with raw pointers: device pointers for a CUDA
// sampler (or C-allocated host memory for a CPU sampler). 0 is NULL. The library checks sizes
// and residency where it can; it cannot check the lengths of device arrays.
type DeviceSampleArgs struct {
	SampleParams

	RowOffsets, Positions                                        uintptr
	Logits                                                       uintptr
	UncondLogits, UncondRowOffsets, GuidanceScales               uintptr
	Temperatures, TopKs, TopPs, MinPs, Seeds, Steps              uintptr
	Tokens, Logprobs, Argmax, Confidence, Margin, Entropy, Probs uintptr
	RequestStatus, AllowedTokenMasks                             uintptr
}

// NewSampleArgs returns SampleArgs holding the library's defaults (dds_sample_args_init).
func NewSampleArgs() SampleArgs { return SampleArgs{SampleParams: defaultSampleParams()} }

// NewDeviceSampleArgs returns DeviceSampleArgs holding the library's defaults.
func NewDeviceSampleArgs() DeviceSampleArgs {
	return DeviceSampleArgs{SampleParams: defaultSampleParams()}
}

type samplePtrs struct {
	rowOffsets, positions, logits, uncondLogits, uncondRowOffsets, guidanceScales,
	temperatures, topKs, topPs, minPs, seeds, steps, tokens, logprobs, argmax, confidence,
	margin, entropy, probs, requestStatus, allowedTokenMasks unsafe.Pointer
}

// maskLen is the number of int32 words NumRequests allowed-token masks of stride `stride`
// (0 = ceil(v/32)) span, or 0 when the stride is invalid (left for the library to reject).
func maskLen(requests, stride, v int) int {
	words := (v + 31) / 32
	if stride == 0 {
		stride = words
	}
	if stride < words {
		return 0
	}
	return matrixLen(requests, stride, words)
}

// ptrOf is the address of the first element, or nil for an empty slice.
func ptrOf[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// checkInt32 refuses host sizes that the C struct cannot hold.
func checkInt32(fn, name string, v int) error {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return argError(ErrInvalidArgument, "%s: args.%s (%d) does not fit in int32", fn, name, v)
	}
	return nil
}

// matrixLen is the number of elements that rows rows of `stride` elements (V used per row)
// occupy, or -1 on overflow. rows <= 0 needs nothing.
func matrixLen(rows, stride, v int) int {
	if rows <= 0 {
		return 0
	}
	if stride > 0 && rows-1 > (math.MaxInt-v)/stride {
		return -1
	}
	return (rows-1)*stride + v
}

// lenChecker collects the first length violation of a call's slices.
type lenChecker struct {
	fn  string
	err error
}

// need checks a non-nil slice of length have against need elements; rule explains need.
func (c *lenChecker) need(name string, isNil bool, have, need int, rule string) {
	if c.err != nil || isNil {
		return
	}
	if need < 0 {
		c.err = argError(ErrInvalidArgument, "%s: args.%s: %s overflows int", c.fn, name, rule)
	} else if have < need {
		c.err = argError(ErrInvalidArgument, "%s: args.%s has %d elements, needs at least %d (%s)",
			c.fn, name, have, need, rule)
	}
}

// pickDType returns the address of the F32 or the 16-bit slice, refusing a mismatch with dtype.
func pickDType(fn, name string, dt DType, f32 []float32, u16 []uint16, dtName string) (
	unsafe.Pointer, int, error) {
	switch {
	case f32 != nil && u16 != nil:
		return nil, 0, argError(ErrInvalidArgument, "%s: args.%s and args.%s16 are both set; set one",
			fn, name, name)
	case f32 != nil && dt != F32:
		return nil, 0, argError(ErrInvalidArgument,
			"%s: args.%s is []float32 but args.%s is %v; use args.%s16 ([]uint16) for bf16/f16",
			fn, name, dtName, dt, name)
	case u16 != nil && dt == F32:
		return nil, 0, argError(ErrInvalidArgument,
			"%s: args.%s16 is []uint16 but args.%s is f32; use args.%s ([]float32)", fn, name,
			dtName, name)
	case f32 != nil:
		return ptrOf(f32), len(f32), nil
	case u16 != nil:
		return ptrOf(u16), len(u16), nil
	}
	return nil, 0, nil
}

// check validates the host scalars the binding depends on and fills the inferred defaults.
func (p *SampleParams) check(fn string) error {
	if !p.initialized {
		return argError(ErrStructSize, "%s: args were not initialised: start from "+
			"dds.NewSampleArgs() / NewDeviceSampleArgs() (a zero struct would mean greedy, "+
			"top_p 0 and token 0 banned)", fn)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"NumRows", p.NumRows}, {"NumRequests", p.NumRequests}, {"UncondNumRows", p.UncondNumRows}} {
		if err := checkInt32(fn, f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sampler) lock() error {
	s.mu.Lock()
	if s.c == nil {
		s.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Sample runs one sampling step on Go slices (dds_sample, CPU backend). The call is complete
// when it returns.
func (s *Sampler) Sample(a *SampleArgs) error {
	const fn = "dds.Sample"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.SampleParams
	if p.initialized && p.NumRequests == 0 {
		if a.RowOffsets != nil {
			p.NumRequests = len(a.RowOffsets) - 1
		} else {
			p.NumRequests = p.NumRows
		}
	}
	if err := p.check(fn); err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.backend != BackendCPU {
		return argError(ErrInvalidArgument, "%s: Go slices need a CPU-backend sampler; this one is "+
			"%v: use SampleDevice with device pointers", fn, s.backend)
	}
	v := s.cfg.VocabSize
	var ptrs samplePtrs
	var nLogits, nUncond, nProbs int
	var err error
	if ptrs.logits, nLogits, err = pickDType(fn, "Logits", p.DType, a.Logits, a.Logits16,
		"DType"); err != nil {
		return err
	}
	if ptrs.uncondLogits, nUncond, err = pickDType(fn, "UncondLogits", p.DType, a.UncondLogits,
		a.UncondLogits16, "DType"); err != nil {
		return err
	}
	if ptrs.probs, nProbs, err = pickDType(fn, "Probs", p.ProbsDType, a.Probs, a.Probs16,
		"ProbsDType"); err != nil {
		return err
	}
	stride := p.RowStride
	if stride == 0 {
		stride = v
	}
	ustride := p.UncondRowStride
	if ustride == 0 {
		ustride = v
	}
	pstride := p.ProbsRowStride
	if pstride == 0 {
		pstride = v
	}
	if ptrs.uncondLogits != nil && p.UncondNumRows == 0 && ustride >= v && nUncond >= v {
		p.UncondNumRows = (nUncond-v)/ustride + 1
		if p.UncondNumRows > math.MaxInt32 {
			p.UncondNumRows = math.MaxInt32
		}
	}
	// Lengths are checked only where the scalars they depend on are valid; invalid scalars are
	// left for the library to reject with its own message (it checks them before any access).
	n, r := p.NumRows, p.NumRequests
	if n > 0 && r >= 1 && n <= s.cfg.MaxRows && r <= s.cfg.MaxRequests {
		c := lenChecker{fn: fn}
		c.need("RowOffsets", a.RowOffsets == nil, len(a.RowOffsets), r+1, "NumRequests+1")
		c.need("Positions", a.Positions == nil, len(a.Positions), n, "NumRows")
		if p.DType.valid() && stride >= v {
			c.need("Logits", ptrs.logits == nil, nLogits, matrixLen(n, stride, v),
				"(NumRows-1)*RowStride+V")
		}
		if p.DType.valid() && ustride >= v && p.UncondNumRows > 0 {
			c.need("UncondLogits", ptrs.uncondLogits == nil, nUncond,
				matrixLen(p.UncondNumRows, ustride, v), "(UncondNumRows-1)*UncondRowStride+V")
		}
		c.need("UncondRowOffsets", a.UncondRowOffsets == nil, len(a.UncondRowOffsets), r,
			"NumRequests")
		c.need("GuidanceScales", a.GuidanceScales == nil, len(a.GuidanceScales), r, "NumRequests")
		c.need("Temperatures", a.Temperatures == nil, len(a.Temperatures), r, "NumRequests")
		c.need("TopKs", a.TopKs == nil, len(a.TopKs), r, "NumRequests")
		c.need("TopPs", a.TopPs == nil, len(a.TopPs), r, "NumRequests")
		c.need("MinPs", a.MinPs == nil, len(a.MinPs), r, "NumRequests")
		c.need("Seeds", a.Seeds == nil, len(a.Seeds), r, "NumRequests")
		c.need("Steps", a.Steps == nil, len(a.Steps), r, "NumRequests")
		c.need("Tokens", a.Tokens == nil, len(a.Tokens), n, "NumRows")
		c.need("Logprobs", a.Logprobs == nil, len(a.Logprobs), n, "NumRows")
		c.need("Argmax", a.Argmax == nil, len(a.Argmax), n, "NumRows")
		c.need("Confidence", a.Confidence == nil, len(a.Confidence), n, "NumRows")
		c.need("Margin", a.Margin == nil, len(a.Margin), n, "NumRows")
		c.need("Entropy", a.Entropy == nil, len(a.Entropy), n, "NumRows")
		if p.ProbsDType.valid() && pstride >= v {
			c.need("Probs", ptrs.probs == nil, nProbs, matrixLen(n, pstride, v),
				"(NumRows-1)*ProbsRowStride+V")
		}
		c.need("RequestStatus", a.RequestStatus == nil, len(a.RequestStatus), r, "NumRequests")
		c.need("AllowedTokenMasks", a.AllowedTokenMasks == nil, len(a.AllowedTokenMasks),
			maskLen(r, p.AllowedMaskStride, v), "(NumRequests-1)*AllowedMaskStride+ceil(V/32)")
		if c.err != nil {
			return c.err
		}
	}
	ptrs.allowedTokenMasks = ptrOf(a.AllowedTokenMasks)
	ptrs.rowOffsets = ptrOf(a.RowOffsets)
	ptrs.positions = ptrOf(a.Positions)
	ptrs.uncondRowOffsets = ptrOf(a.UncondRowOffsets)
	ptrs.guidanceScales = ptrOf(a.GuidanceScales)
	ptrs.temperatures = ptrOf(a.Temperatures)
	ptrs.topKs = ptrOf(a.TopKs)
	ptrs.topPs = ptrOf(a.TopPs)
	ptrs.minPs = ptrOf(a.MinPs)
	ptrs.seeds = ptrOf(a.Seeds)
	ptrs.steps = ptrOf(a.Steps)
	ptrs.tokens = ptrOf(a.Tokens)
	ptrs.logprobs = ptrOf(a.Logprobs)
	ptrs.argmax = ptrOf(a.Argmax)
	ptrs.confidence = ptrOf(a.Confidence)
	ptrs.margin = ptrOf(a.Margin)
	ptrs.entropy = ptrOf(a.Entropy)
	ptrs.requestStatus = ptrOf(a.RequestStatus)
	err = sampleGo(s.c, &p, &ptrs)
	runtime.KeepAlive(s)
	runtime.KeepAlive(a)
	return err
}

// SampleDevice queues one sampling step on `stream` (a cudaStream_t as uintptr; 0 = the legacy
// default stream) with raw pointers (dds_sample). On the CUDA backend it returns once the work
// is queued; on the CPU backend (pointers into C memory) when it is done.
func (s *Sampler) SampleDevice(a *DeviceSampleArgs, stream uintptr) error {
	const fn = "dds.SampleDevice"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.SampleParams
	if p.initialized && p.NumRequests == 0 && a.RowOffsets == 0 {
		p.NumRequests = p.NumRows
	}
	if err := p.check(fn); err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	err := sampleRaw(s.c, &p, a, stream)
	runtime.KeepAlive(s)
	return err
}
