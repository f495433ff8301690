// Package dds is the Go binding of libdds, the discrete-diffusion sampler (include/dds/dds.h).
//
// A Sampler wraps one dds_sampler. On the CPU backend, Sample, StashLogprobs, Reveal and
// VerifyDrafts take Go slices (zero-copy: the slices are handed to the library for the duration
// of the call). On the CUDA backend, their Device variants (SampleDevice, ...) take device
// pointers as uintptr and a CUDA stream (cudaStream_t) as uintptr; they queue work and return.
//
// Argument structs start from NewSampleArgs / NewStashArgs (or their Device variants), which
// fill the library's defaults (temperature 1, top-p 1, no banned token, ...), like the C
// dds_*_init functions; a zero-valued struct is refused with ErrStructSize.
//
// Errors are *Error values carrying the library's status code and its message, which names the
// argument and the rule it broke. errors.Is(err, dds.ErrInvalidArgument) tests the code.
//
// The exact semantics are in docs/sampling.md of the dds repository.
package dds

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Status is a dds_status code. A Status is also an error (its Error() is the library's name
// for it), so that errors.Is(err, dds.ErrCapacity) works on any *Error.
type Status int32

// Status codes (dds_status). The values are fixed by the C ABI.
const (
	StatusOK           Status = 0
	ErrInvalidArgument Status = 1  // a value breaks a rule (size, stride, enum, range, ...)
	ErrNullPointer     Status = 2  // a required array is missing (nil)
	ErrCapacity        Status = 3  // exceeds a capacity declared in Config
	ErrUnsupported     Status = 4  // valid but not supported by this build or backend
	ErrNoDevice        Status = 5  // CUDA backend asked for, but no usable CUDA device
	ErrCUDA            Status = 6  // a CUDA runtime call failed
	ErrOutOfMemory     Status = 7  // allocation failed (only in NewSampler)
	ErrStructSize      Status = 8  // argument struct not initialised
	ErrInvalidValue    Status = 9  // debug mode: a per-request array value is out of range
	ErrBusy            Status = 10 // the sampler is in use by another thread
	ErrInternal        Status = 11 // a bug in dds
)

// String is the library's name of the code ("DDS_ERR_CAPACITY", ...).
func (s Status) String() string { return statusString(s) }

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return "dds: " + statusString(s) }

// Error is a failed dds call: the status code and the message of dds_last_error() (or of the
// binding's own check, which follows the library's wording).
type Error struct {
	Code    Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "dds: " + e.Code.String()
	}
	return "dds: " + e.Code.String() + ": " + e.Message
}

// Unwrap returns the code, so that errors.Is(err, dds.ErrNullPointer) works.
func (e *Error) Unwrap() error { return e.Code }

// ErrClosed is returned by every method of a Sampler after Close.
var ErrClosed = errors.New("dds: the sampler is closed")

func argError(code Status, format string, a ...interface{}) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// Backend selects where a sampler runs (dds_backend).
type Backend int32

const (
	BackendCPU  Backend = 0
	BackendCUDA Backend = 1
)

func (b Backend) String() string {
	switch b {
	case BackendCPU:
		return "cpu"
	case BackendCUDA:
		return "cuda"
	}
	return fmt.Sprintf("Backend(%d)", int32(b))
}

// DType is the element type of logits and probability arrays (dds_dtype).
type DType int32

const (
	F32  DType = 0 // float32: []float32 fields
	BF16 DType = 1 // bfloat16 bit patterns: []uint16 fields (see F32ToBF16)
	F16  DType = 2 // IEEE half bit patterns: []uint16 fields (see F32ToF16)
)

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("DType(%d)", int32(d))
}

func (d DType) valid() bool { return d == F32 || d == BF16 || d == F16 }

// StatsMode selects the distribution that the statistics describe (dds_stats_mode).
type StatsMode int32

const (
	// StatsProcessed: after guidance, ban, temperature and filters (what was sampled).
	StatsProcessed StatsMode = 0
	// StatsGuided: after guidance and ban only (temperature 1, no filters).
	StatsGuided StatsMode = 1
)

// Flags of Config.Flags.
const (
	// FlagDebugChecks validates device-resident per-request arrays on the host (slow).
	FlagDebugChecks uint32 = 1
)

// Bits of the per-request status arrays (DDS_REQ_*).
const (
	ReqBadTemperature = 1
	ReqBadGuidance    = 2
	ReqBadTopK        = 4
	ReqBadTopP        = 8
	ReqBadMinP        = 16
	ReqBadUncondRows  = 32
	ReqEmptyRow       = 64
	ReqBadSlot        = 128
)

// Config mirrors dds_sampler_config. Zero capacities mean the library's defaults (MaxRows 4096,
// MaxRequests 1024, MaxStashWidth 20).
type Config struct {
	Backend       Backend
	Device        int // CUDA device ordinal (CUDA backend only)
	VocabSize     int // V, required
	MaxRows       int
	MaxRequests   int
	MaxStashWidth int
	Flags         uint32
	// NumThreads: CPU backend threads sharing a call's rows (0 = the library's default, 1 =
	// single-threaded, at most 256). Outputs do not depend on it.
	NumThreads int
}

// Sampler is one dds sampler. Its methods may be called from several goroutines: calls on one
// Sampler are serialised by a mutex (the library allows one call at a time per sampler, for it
// owns one scratch workspace). Use separate Samplers for parallel work. Close releases it; a
// finalizer does so too if it is forgotten.
type Sampler struct {
	mu      sync.Mutex
	c       cSampler
	cfg     Config
	backend Backend
}

// NewSampler creates a sampler (dds_create).
func NewSampler(cfg Config) (*Sampler, error) {
	for _, f := range []struct {
		name string
		v    int
	}{{"Device", cfg.Device}, {"VocabSize", cfg.VocabSize}, {"MaxRows", cfg.MaxRows},
		{"MaxRequests", cfg.MaxRequests}, {"MaxStashWidth", cfg.MaxStashWidth},
		{"NumThreads", cfg.NumThreads}} {
		if f.v < math.MinInt32 || f.v > math.MaxInt32 {
			return nil, argError(ErrInvalidArgument, "dds.NewSampler: cfg.%s (%d) does not fit in int32",
				f.name, f.v)
		}
	}
	c, err := createSampler(&cfg)
	if err != nil {
		return nil, err
	}
	s := &Sampler{c: c, cfg: cfg}
	s.backend = samplerBackend(c)
	runtime.SetFinalizer(s, (*Sampler).finalize)
	return s, nil
}

func (s *Sampler) finalize() {
	if s.c != nil {
		_ = destroySampler(s.c)
		s.c = nil
	}
}

// Close destroys the sampler (dds_destroy). With the CUDA backend, no work queued with it may
// still be running (synchronise the stream first). Close is idempotent; later calls of other
// methods return ErrClosed.
func (s *Sampler) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil
	}
	err := destroySampler(s.c)
	s.c = nil
	runtime.SetFinalizer(s, nil)
	runtime.KeepAlive(s)
	return err
}

// Config returns the configuration the sampler was created with, defaults filled in.
func (s *Sampler) Config() Config { return s.cfg }

// Backend returns the sampler's backend.
func (s *Sampler) Backend() Backend { return s.backend }

// VocabSize returns V.
func (s *Sampler) VocabSize() int { return s.cfg.VocabSize }
