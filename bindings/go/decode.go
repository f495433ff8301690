package dds

import (
	"runtime"
	"unsafe"
)

// RevealPolicy picks the rows a request commits in one step (dds_reveal_policy).
type RevealPolicy int32

const (
	RevealTopN      RevealPolicy = 0 // the n best eligible rows
	RevealThreshold RevealPolicy = 1 // every eligible row with score >= threshold, at least one
	RevealFactor    RevealPolicy = 2 // Fast-dLLM factor rule
	RevealRandom    RevealPolicy = 3 // n eligible rows uniformly at random
	// RevealEntropyBound is the EB-sampler: Scores are entropies (lower first); the longest
	// prefix whose entropies, less the largest, sum to <= the request's bound (at least one).
	RevealEntropyBound RevealPolicy = 4
)

// More per-request status bits (dds_reveal).
const (
	ReqBadPolicy   = 256  // unknown policy: TOP_N used
	ReqBadPosition = 512  // a row's position is outside [0, CanvasLength)
	ReqTooManyRows = 1024 // CUDA dds_reveal: a request with more than 4096 rows is not processed
	// Row offsets of the request reversed or outside [0, NumRows] (or a bad first / last
	// offset): the request owns no rows (docs/sampling.md §1). Also set by sample and stash.
	ReqBadRowOffsets = 2048
	ReqBadDraftCount = 4096 // verify: a draft count outside [0, NumDrafts]: clamped
	// ReqBadEntropyBound: RevealEntropyBound with a NaN or negative bound; 0 used.
	ReqBadEntropyBound = 8192
	// An input token id outside [0, vocab): stash committed / own ids (written as given, value
	// -inf, rank 0), verify drafts (rejected).
	ReqBadTokenID     = 16384
	ReqBadNumTokenIDs = 32768 // stash: a num_token_ids value outside [0, NumTop]: clamped
	ReqBadRevealParam = 65536 // reveal: NaN threshold, bad factor or position temperature
)

// RevealParams are the host scalars of dds_reveal_args. Start from NewRevealArgs.
type RevealParams struct {
	NumRows int
	// NumRequests: 0 means len(RowOffsets)-1 when RowOffsets is set (Go slices only), else
	// NumRows.
	NumRequests         int
	Policy              RevealPolicy // default policy. Default RevealTopN
	Count               int32        // default n; <= 0: ceil(eligible / steps_left). Default 1
	Threshold           float32      // default tau. Default 0.9
	Factor              float32      // default f. Default 1
	PositionTemperature float32      // default. Default 0
	EntropyBound        float32      // default RevealEntropyBound bound (nats). Default 0.1
	Seed                uint64
	Step                uint32
	CanvasStride        int   // elements between canvas rows, >= CanvasLength. 0 = CanvasLength
	CanvasLength        int   // positions per canvas (with a canvas)
	MaskToken           int32 // canvas value of a masked position (EOS rule)
	EOSToken            int32 // -1 = no EOS rule

	initialized bool
}

// RevealArgs mirrors dds_reveal_args with Go slices (CPU backend); see docs/decoding.md.
type RevealArgs struct {
	RevealParams

	RowOffsets           []int32   // [NumRequests+1], nil = one row per request
	Positions            []int32   // [NumRows] canvas positions, nil = index within the request
	Scores               []float32 // [NumRows] higher is better. Required
	Eligible             []uint8   // [NumRows] nonzero = may be revealed, nil = all
	Policies             []int32   // [NumRequests] RevealPolicy values
	Counts               []int32   // [NumRequests]
	StepsLeft            []int32   // [NumRequests]
	Thresholds           []float32 // [NumRequests]
	Factors              []float32 // [NumRequests]
	PositionTemperatures []float32 // [NumRequests]
	Seeds                []uint64  // [NumRequests]
	Steps                []uint32  // [NumRequests]
	EntropyBounds        []float32 // [NumRequests] RevealEntropyBound bounds

	Canvas []int32 // [NumRequests rows of CanvasStride] written at revealed positions; nil = none
	Tokens []int32 // [NumRows] token written at a revealed row's position (with Canvas)

	Reveal        []uint8 // [NumRows] 1 = revealed. Required
	NumRevealed   []int32 // [NumRequests]
	Finished      []int32 // [NumRequests] EOS rule result
	RequestStatus []int32 // [NumRequests]
}

// DeviceRevealArgs mirrors dds_reveal_args with raw (device) pointers; 0 is NULL.
type DeviceRevealArgs struct {
	RevealParams

	RowOffsets, Positions, Scores, Eligible            uintptr
	Policies, Counts, StepsLeft, Thresholds, Factors   uintptr
	PositionTemperatures, Seeds, Steps, Canvas, Tokens uintptr
	Reveal, NumRevealed, Finished, RequestStatus       uintptr
	EntropyBounds                                      uintptr
}

// NewRevealArgs returns RevealArgs holding the library's defaults (dds_reveal_args_init).
func NewRevealArgs() RevealArgs { return RevealArgs{RevealParams: defaultRevealParams()} }

// NewDeviceRevealArgs returns DeviceRevealArgs holding the library's defaults.
func NewDeviceRevealArgs() DeviceRevealArgs {
	return DeviceRevealArgs{RevealParams: defaultRevealParams()}
}

type revealPtrs struct {
	rowOffsets, positions, scores, eligible, policies, counts, stepsLeft, thresholds, factors,
	positionTemperatures, seeds, steps, canvas, tokens, reveal, numRevealed, finished,
	requestStatus, entropyBounds unsafe.Pointer
}

func (p *RevealParams) check(fn string) error {
	if !p.initialized {
		return argError(ErrStructSize, "%s: args were not initialised: start from "+
			"dds.NewRevealArgs() / NewDeviceRevealArgs()", fn)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"NumRows", p.NumRows}, {"NumRequests", p.NumRequests}, {"CanvasLength", p.CanvasLength}} {
		if err := checkInt32(fn, f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// Reveal chooses the rows to commit this step (dds_reveal, CPU backend, Go slices).
func (s *Sampler) Reveal(a *RevealArgs) error {
	const fn = "dds.Reveal"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.RevealParams
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
			"%v: use RevealDevice with device pointers", fn, s.backend)
	}
	n, r := p.NumRows, p.NumRequests
	if n > 0 && r >= 1 && r <= n && n <= s.cfg.MaxRows && r <= s.cfg.MaxRequests {
		c := lenChecker{fn: fn}
		c.need("RowOffsets", a.RowOffsets == nil, len(a.RowOffsets), r+1, "NumRequests+1")
		for _, f := range []struct {
			name  string
			isNil bool
			have  int
		}{{"Positions", a.Positions == nil, len(a.Positions)}, {"Scores", a.Scores == nil, len(a.Scores)},
			{"Eligible", a.Eligible == nil, len(a.Eligible)}, {"Tokens", a.Tokens == nil, len(a.Tokens)},
			{"Reveal", a.Reveal == nil, len(a.Reveal)}} {
			c.need(f.name, f.isNil, f.have, n, "NumRows")
		}
		for _, f := range []struct {
			name  string
			isNil bool
			have  int
		}{{"Policies", a.Policies == nil, len(a.Policies)}, {"Counts", a.Counts == nil, len(a.Counts)},
			{"StepsLeft", a.StepsLeft == nil, len(a.StepsLeft)},
			{"Thresholds", a.Thresholds == nil, len(a.Thresholds)},
			{"Factors", a.Factors == nil, len(a.Factors)},
			{"PositionTemperatures", a.PositionTemperatures == nil, len(a.PositionTemperatures)},
			{"Seeds", a.Seeds == nil, len(a.Seeds)}, {"Steps", a.Steps == nil, len(a.Steps)},
			{"NumRevealed", a.NumRevealed == nil, len(a.NumRevealed)},
			{"Finished", a.Finished == nil, len(a.Finished)},
			{"EntropyBounds", a.EntropyBounds == nil, len(a.EntropyBounds)},
			{"RequestStatus", a.RequestStatus == nil, len(a.RequestStatus)}} {
			c.need(f.name, f.isNil, f.have, r, "NumRequests")
		}
		stride := p.CanvasStride
		if stride == 0 {
			stride = p.CanvasLength
		}
		if p.CanvasLength >= 1 && stride >= p.CanvasLength {
			c.need("Canvas", a.Canvas == nil, len(a.Canvas), matrixLen(r, stride, p.CanvasLength),
				"(NumRequests-1)*CanvasStride+CanvasLength")
		}
		if c.err != nil {
			return c.err
		}
	}
	ptrs := revealPtrs{
		rowOffsets: ptrOf(a.RowOffsets), positions: ptrOf(a.Positions), scores: ptrOf(a.Scores),
		eligible: ptrOf(a.Eligible), policies: ptrOf(a.Policies), counts: ptrOf(a.Counts),
		stepsLeft: ptrOf(a.StepsLeft), thresholds: ptrOf(a.Thresholds), factors: ptrOf(a.Factors),
		positionTemperatures: ptrOf(a.PositionTemperatures), seeds: ptrOf(a.Seeds),
		steps: ptrOf(a.Steps), canvas: ptrOf(a.Canvas), tokens: ptrOf(a.Tokens),
		reveal: ptrOf(a.Reveal), numRevealed: ptrOf(a.NumRevealed), finished: ptrOf(a.Finished),
		requestStatus: ptrOf(a.RequestStatus), entropyBounds: ptrOf(a.EntropyBounds),
	}
	err := revealGo(s.c, &p, &ptrs)
	runtime.KeepAlive(s)
	runtime.KeepAlive(a)
	return err
}

// RevealDevice queues dds_reveal on `stream` with raw (device) pointers.
func (s *Sampler) RevealDevice(a *DeviceRevealArgs, stream uintptr) error {
	const fn = "dds.RevealDevice"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.RevealParams
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
	err := revealRaw(s.c, &p, a, stream)
	runtime.KeepAlive(s)
	return err
}

// VerifyParams are the host scalars of dds_verify_args. Start from NewVerifyArgs.
type VerifyParams struct {
	NumRequests     int // requests. Default 1
	NumDrafts       int // n: drafts per request (layout capacity), >= 0
	DraftRowStride  int // 0 = V
	TargetRowStride int // 0 = V
	DType           DType
	Temperature     float32 // default T (1; 0 = greedy)
	TopK            int32
	TopP            float32
	MinP            float32
	Seed            uint64
	Step            uint32
	BannedToken     int32 // -1 = none
	// AllowedMaskStride: int32 words between requests' AllowedTokenMasks. 0 = ceil(V/32)
	AllowedMaskStride int

	initialized bool
}

// VerifyArgs mirrors dds_verify_args with Go slices (CPU backend): speculative verification of
// drafts (Leviathan et al.). Draft row r*n+i is q_i of request r; target row r*(n+1)+i is p_i.
type VerifyArgs struct {
	VerifyParams

	DraftCounts    []int32   // [NumRequests] n_r in [0, n], nil = n each
	DraftTokens    []int32   // [NumRequests*n]
	DraftLogits    []float32 // [NumRequests*n rows of DraftRowStride], DType F32
	DraftLogits16  []uint16  // the same for BF16 / F16
	TargetLogits   []float32 // [NumRequests*(n+1) rows of TargetRowStride]
	TargetLogits16 []uint16
	Temperatures   []float32 // [NumRequests]
	TopKs          []int32
	TopPs          []float32
	MinPs          []float32
	Seeds          []uint64
	Steps          []uint32

	AcceptedCounts []int32   // [NumRequests] accepted drafts a. Required
	OutTokens      []int32   // [NumRequests*(n+1)] a+1 tokens then -1. Required
	OutLogprobs    []float32 // [NumRequests*(n+1)]
	RequestStatus  []int32   // [NumRequests]

	// AllowedTokenMasks: allowed-token bitmasks as in SampleArgs, applied to each request's
	// draft and target rows.
	AllowedTokenMasks []int32
}

// DeviceVerifyArgs mirrors dds_verify_args with raw (device) pointers; 0 is NULL.
type DeviceVerifyArgs struct {
	VerifyParams

	DraftCounts, DraftTokens, DraftLogits, TargetLogits   uintptr
	Temperatures, TopKs, TopPs, MinPs, Seeds, Steps       uintptr
	AcceptedCounts, OutTokens, OutLogprobs, RequestStatus uintptr
	AllowedTokenMasks                                     uintptr
}

// NewVerifyArgs returns VerifyArgs holding the library's defaults (dds_verify_args_init).
func NewVerifyArgs() VerifyArgs { return VerifyArgs{VerifyParams: defaultVerifyParams()} }

// NewDeviceVerifyArgs returns DeviceVerifyArgs holding the library's defaults.
func NewDeviceVerifyArgs() DeviceVerifyArgs {
	return DeviceVerifyArgs{VerifyParams: defaultVerifyParams()}
}

type verifyPtrs struct {
	draftCounts, draftTokens, draftLogits, targetLogits, temperatures, topKs, topPs, minPs,
	seeds, steps, acceptedCounts, outTokens, outLogprobs, requestStatus,
	allowedTokenMasks unsafe.Pointer
}

func (p *VerifyParams) check(fn string) error {
	if !p.initialized {
		return argError(ErrStructSize, "%s: args were not initialised: start from "+
			"dds.NewVerifyArgs() / NewDeviceVerifyArgs()", fn)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"NumRequests", p.NumRequests}, {"NumDrafts", p.NumDrafts}} {
		if err := checkInt32(fn, f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// VerifyDrafts verifies speculative drafts exactly (dds_verify_drafts, CPU backend, Go slices).
func (s *Sampler) VerifyDrafts(a *VerifyArgs) error {
	const fn = "dds.VerifyDrafts"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.VerifyParams
	if err := p.check(fn); err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.backend != BackendCPU {
		return argError(ErrInvalidArgument, "%s: Go slices need a CPU-backend sampler; this one is "+
			"%v: use VerifyDraftsDevice with device pointers", fn, s.backend)
	}
	v := s.cfg.VocabSize
	var ptrs verifyPtrs
	var nDraft, nTarget int
	var err error
	if ptrs.draftLogits, nDraft, err = pickDType(fn, "DraftLogits", p.DType, a.DraftLogits,
		a.DraftLogits16, "DType"); err != nil {
		return err
	}
	if ptrs.targetLogits, nTarget, err = pickDType(fn, "TargetLogits", p.DType, a.TargetLogits,
		a.TargetLogits16, "DType"); err != nil {
		return err
	}
	r, n := p.NumRequests, p.NumDrafts
	dstride, tstride := p.DraftRowStride, p.TargetRowStride
	if dstride == 0 {
		dstride = v
	}
	if tstride == 0 {
		tstride = v
	}
	if r >= 1 && n >= 0 && r <= s.cfg.MaxRequests && r*(n+1) <= s.cfg.MaxRows {
		c := lenChecker{fn: fn}
		c.need("DraftCounts", a.DraftCounts == nil, len(a.DraftCounts), r, "NumRequests")
		c.need("DraftTokens", a.DraftTokens == nil, len(a.DraftTokens), r*n, "NumRequests*NumDrafts")
		if p.DType.valid() && dstride >= v {
			c.need("DraftLogits", ptrs.draftLogits == nil, nDraft, matrixLen(r*n, dstride, v),
				"(NumRequests*NumDrafts-1)*DraftRowStride+V")
		}
		if p.DType.valid() && tstride >= v {
			c.need("TargetLogits", ptrs.targetLogits == nil, nTarget, matrixLen(r*(n+1), tstride, v),
				"(NumRequests*(NumDrafts+1)-1)*TargetRowStride+V")
		}
		for _, f := range []struct {
			name  string
			isNil bool
			have  int
		}{{"Temperatures", a.Temperatures == nil, len(a.Temperatures)},
			{"TopKs", a.TopKs == nil, len(a.TopKs)}, {"TopPs", a.TopPs == nil, len(a.TopPs)},
			{"MinPs", a.MinPs == nil, len(a.MinPs)}, {"Seeds", a.Seeds == nil, len(a.Seeds)},
			{"Steps", a.Steps == nil, len(a.Steps)},
			{"AcceptedCounts", a.AcceptedCounts == nil, len(a.AcceptedCounts)},
			{"RequestStatus", a.RequestStatus == nil, len(a.RequestStatus)}} {
			c.need(f.name, f.isNil, f.have, r, "NumRequests")
		}
		c.need("OutTokens", a.OutTokens == nil, len(a.OutTokens), r*(n+1), "NumRequests*(NumDrafts+1)")
		c.need("OutLogprobs", a.OutLogprobs == nil, len(a.OutLogprobs), r*(n+1),
			"NumRequests*(NumDrafts+1)")
		c.need("AllowedTokenMasks", a.AllowedTokenMasks == nil, len(a.AllowedTokenMasks),
			maskLen(r, p.AllowedMaskStride, v), "(NumRequests-1)*AllowedMaskStride+ceil(V/32)")
		if c.err != nil {
			return c.err
		}
	}
	ptrs.draftCounts = ptrOf(a.DraftCounts)
	ptrs.draftTokens = ptrOf(a.DraftTokens)
	ptrs.temperatures = ptrOf(a.Temperatures)
	ptrs.topKs = ptrOf(a.TopKs)
	ptrs.topPs = ptrOf(a.TopPs)
	ptrs.minPs = ptrOf(a.MinPs)
	ptrs.seeds = ptrOf(a.Seeds)
	ptrs.steps = ptrOf(a.Steps)
	ptrs.acceptedCounts = ptrOf(a.AcceptedCounts)
	ptrs.outTokens = ptrOf(a.OutTokens)
	ptrs.outLogprobs = ptrOf(a.OutLogprobs)
	ptrs.requestStatus = ptrOf(a.RequestStatus)
	ptrs.allowedTokenMasks = ptrOf(a.AllowedTokenMasks)
	err = verifyGo(s.c, &p, &ptrs)
	runtime.KeepAlive(s)
	runtime.KeepAlive(a)
	return err
}

// VerifyDraftsDevice queues dds_verify_drafts on `stream` with raw (device) pointers.
func (s *Sampler) VerifyDraftsDevice(a *DeviceVerifyArgs, stream uintptr) error {
	const fn = "dds.VerifyDraftsDevice"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.VerifyParams
	if err := p.check(fn); err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	err := verifyRaw(s.c, &p, a, stream)
	runtime.KeepAlive(s)
	return err
}
