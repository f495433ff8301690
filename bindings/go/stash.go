package dds

import (
	"runtime"
	"unsafe"
)

// StashMode selects what dds_stash_logprobs writes (logits_mode).
type StashMode int32

const (
	StashModeLogprobs StashMode = 0 // log_softmax(l / T)
	StashModeLogits   StashMode = 1 // the tempered logits l / T
)

// StashParams are the host scalars of dds_stash_args. Start from NewStashArgs.
type StashParams struct {
	NumRows int
	// NumRequests: 0 means len(RowOffsets)-1 when RowOffsets is set (Go slices only), else
	// NumRows.
	NumRequests int
	DType       DType
	RowStride   int     // 0 = V
	Temperature float32 // default T when Temperatures is nil (1; T <= 0 is taken as 1)
	NumTop      int     // n: entries per row = n + 1. Default 20
	Mode        StashMode
	NumSlots    int // slots in the outputs, required
	RowsPerSlot int // rows per slot in the outputs, required
	// AllowedMaskStride: int32 words between requests' AllowedTokenMasks. 0 = ceil(V/32)
	AllowedMaskStride int

	initialized bool
}

// StashArgs mirrors dds_stash_args with Go slices (CPU backend). Outputs are
// [NumSlots, RowsPerSlot, NumTop+1], element (slot, j, e) at (slot*RowsPerSlot+j)*(NumTop+1)+e.
type StashArgs struct {
	StashParams

	RowOffsets      []int32   // [NumRequests+1], nil = one row per request
	Logits          []float32 // DType F32
	Logits16        []uint16  // DType BF16 / F16
	Keep            []uint8   // [NumRequests] nonzero = stash, nil = all
	Slots           []int32   // [NumRequests] output slot, nil = request index
	NumValid        []int32   // [NumRequests] rows to write, nil = all
	Temperatures    []float32 // [NumRequests]
	CommittedTokens []int32   // [NumRows] entry-0 token, nil = argmax
	TokenIDs        []int32   // [NumRequests*NumTop] each request's own ids
	NumTokenIDs     []int32   // [NumRequests]

	OutTokenIDs   []int32
	OutLogprobs   []float32
	OutRanks      []int32
	RequestStatus []int32 // [NumRequests]

	// AllowedTokenMasks: allowed-token bitmasks as in SampleArgs; a disallowed token is -inf.
	AllowedTokenMasks []int32
}

// DeviceStashArgs mirrors dds_stash_args with raw (device) pointers; 0 is NULL.
type DeviceStashArgs struct {
	StashParams

	RowOffsets, Logits, Keep, Slots, NumValid, Temperatures, CommittedTokens uintptr
	TokenIDs, NumTokenIDs                                                    uintptr
	OutTokenIDs, OutLogprobs, OutRanks, RequestStatus, AllowedTokenMasks     uintptr
}

// NewStashArgs returns StashArgs holding the library's defaults (dds_stash_args_init).
func NewStashArgs() StashArgs { return StashArgs{StashParams: defaultStashParams()} }

// NewDeviceStashArgs returns DeviceStashArgs holding the library's defaults.
func NewDeviceStashArgs() DeviceStashArgs {
	return DeviceStashArgs{StashParams: defaultStashParams()}
}

type stashPtrs struct {
	rowOffsets, logits, keep, slots, numValid, temperatures, committedTokens, tokenIDs,
	numTokenIDs, outTokenIDs, outLogprobs, outRanks, requestStatus, allowedTokenMasks unsafe.Pointer
}

func (p *StashParams) check(fn string) error {
	if !p.initialized {
		return argError(ErrStructSize, "%s: args were not initialised: start from "+
			"dds.NewStashArgs() / NewDeviceStashArgs()", fn)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"NumRows", p.NumRows}, {"NumRequests", p.NumRequests}, {"NumTop", p.NumTop},
		{"NumSlots", p.NumSlots}, {"RowsPerSlot", p.RowsPerSlot}} {
		if err := checkInt32(fn, f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// StashLogprobs writes the top log-probabilities of the kept requests (dds_stash_logprobs, CPU
// backend, Go slices).
func (s *Sampler) StashLogprobs(a *StashArgs) error {
	const fn = "dds.StashLogprobs"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.StashParams
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
			"%v: use StashLogprobsDevice with device pointers", fn, s.backend)
	}
	v := s.cfg.VocabSize
	var ptrs stashPtrs
	var nLogits int
	var err error
	if ptrs.logits, nLogits, err = pickDType(fn, "Logits", p.DType, a.Logits, a.Logits16,
		"DType"); err != nil {
		return err
	}
	stride := p.RowStride
	if stride == 0 {
		stride = v
	}
	n, r := p.NumRows, p.NumRequests
	if n > 0 && r >= 1 && n <= s.cfg.MaxRows && r <= s.cfg.MaxRequests && p.NumTop >= 0 &&
		p.NumTop <= s.cfg.MaxStashWidth && p.NumSlots >= 1 && p.RowsPerSlot >= 1 {
		c := lenChecker{fn: fn}
		c.need("RowOffsets", a.RowOffsets == nil, len(a.RowOffsets), r+1, "NumRequests+1")
		if p.DType.valid() && stride >= v {
			c.need("Logits", ptrs.logits == nil, nLogits, matrixLen(n, stride, v),
				"(NumRows-1)*RowStride+V")
		}
		c.need("Keep", a.Keep == nil, len(a.Keep), r, "NumRequests")
		c.need("Slots", a.Slots == nil, len(a.Slots), r, "NumRequests")
		c.need("NumValid", a.NumValid == nil, len(a.NumValid), r, "NumRequests")
		c.need("Temperatures", a.Temperatures == nil, len(a.Temperatures), r, "NumRequests")
		c.need("CommittedTokens", a.CommittedTokens == nil, len(a.CommittedTokens), n, "NumRows")
		c.need("TokenIDs", a.TokenIDs == nil, len(a.TokenIDs), matrixLen(r, p.NumTop, p.NumTop),
			"NumRequests*NumTop")
		c.need("NumTokenIDs", a.NumTokenIDs == nil, len(a.NumTokenIDs), r, "NumRequests")
		out := matrixLen(p.NumSlots*p.RowsPerSlot, p.NumTop+1, p.NumTop+1)
		const rule = "NumSlots*RowsPerSlot*(NumTop+1)"
		c.need("OutTokenIDs", a.OutTokenIDs == nil, len(a.OutTokenIDs), out, rule)
		c.need("OutLogprobs", a.OutLogprobs == nil, len(a.OutLogprobs), out, rule)
		c.need("OutRanks", a.OutRanks == nil, len(a.OutRanks), out, rule)
		c.need("RequestStatus", a.RequestStatus == nil, len(a.RequestStatus), r, "NumRequests")
		c.need("AllowedTokenMasks", a.AllowedTokenMasks == nil, len(a.AllowedTokenMasks),
			maskLen(r, p.AllowedMaskStride, s.cfg.VocabSize),
			"(NumRequests-1)*AllowedMaskStride+ceil(V/32)")
		if c.err != nil {
			return c.err
		}
	}
	ptrs.rowOffsets = ptrOf(a.RowOffsets)
	ptrs.keep = ptrOf(a.Keep)
	ptrs.slots = ptrOf(a.Slots)
	ptrs.numValid = ptrOf(a.NumValid)
	ptrs.temperatures = ptrOf(a.Temperatures)
	ptrs.committedTokens = ptrOf(a.CommittedTokens)
	ptrs.tokenIDs = ptrOf(a.TokenIDs)
	ptrs.numTokenIDs = ptrOf(a.NumTokenIDs)
	ptrs.outTokenIDs = ptrOf(a.OutTokenIDs)
	ptrs.outLogprobs = ptrOf(a.OutLogprobs)
	ptrs.outRanks = ptrOf(a.OutRanks)
	ptrs.requestStatus = ptrOf(a.RequestStatus)
	ptrs.allowedTokenMasks = ptrOf(a.AllowedTokenMasks)
	err = stashGo(s.c, &p, &ptrs)
	runtime.KeepAlive(s)
	runtime.KeepAlive(a)
	return err
}

// StashLogprobsDevice queues the stash on `stream` with raw (device) pointers.
func (s *Sampler) StashLogprobsDevice(a *DeviceStashArgs, stream uintptr) error {
	const fn = "dds.StashLogprobsDevice"
	if a == nil {
		return argError(ErrNullPointer, "%s: args is nil", fn)
	}
	p := a.StashParams
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
	err := stashRaw(s.c, &p, a, stream)
	runtime.KeepAlive(s)
	return err
}
