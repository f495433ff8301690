//go:build cuda

package cudart

// Links the static CUDA runtime by default (the test binary then needs only the driver on the
// device machine). Override with CGO_CFLAGS / CGO_LDFLAGS, e.g. CGO_LDFLAGS=-lcudart.

// #cgo CFLAGS: -I/usr/local/cuda/include
// #cgo LDFLAGS: -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++
/*
#include <stdint.h>
#include <cuda_runtime_api.h>
static cudaError_t ddsgo_download_at(void* dst, uintptr_t src, size_t n) {
  return cudaMemcpy(dst, (const void*)src, n, cudaMemcpyDeviceToHost);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Available reports whether this build links the CUDA runtime (build tag cuda).
const Available = true

func check(what string, e C.cudaError_t) error {
	if e == C.cudaSuccess {
		return nil
	}
	return fmt.Errorf("%s: %s (%s)", what, C.GoString(C.cudaGetErrorName(e)),
		C.GoString(C.cudaGetErrorString(e)))
}

// DeviceCount is cudaGetDeviceCount (0 with an error when there is no usable device).
func DeviceCount() (int, error) {
	var n C.int
	if err := check("cudaGetDeviceCount", C.cudaGetDeviceCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceName is the name of device d.
func DeviceName(d int) string {
	var p C.struct_cudaDeviceProp
	if C.cudaGetDeviceProperties(&p, C.int(d)) != C.cudaSuccess {
		return "?"
	}
	return C.GoString(&p.name[0])
}

// SetDevice is cudaSetDevice.
func SetDevice(d int) error { return check("cudaSetDevice", C.cudaSetDevice(C.int(d))) }

// Mem is device memory.
type Mem struct {
	p unsafe.Pointer
	n int
}

// Malloc is cudaMalloc.
func Malloc(n int) (Mem, error) {
	var p unsafe.Pointer
	if n < 1 {
		n = 1
	}
	if err := check("cudaMalloc", C.cudaMalloc(&p, C.size_t(n))); err != nil {
		return Mem{}, err
	}
	return Mem{p: p, n: n}, nil
}

// Ptr is the device address as the dds API takes it.
func (m Mem) Ptr() uintptr { return uintptr(m.p) }

// Free is cudaFree.
func (m *Mem) Free() error {
	err := check("cudaFree", C.cudaFree(m.p))
	m.p = nil
	return err
}

// Memset is cudaMemset (byte value).
func (m Mem) Memset(b byte) error {
	return check("cudaMemset", C.cudaMemset(m.p, C.int(b), C.size_t(m.n)))
}

func bytesOf[T any](s []T) (unsafe.Pointer, int) {
	if len(s) == 0 {
		return nil, 0
	}
	var z T
	return unsafe.Pointer(&s[0]), len(s) * int(unsafe.Sizeof(z))
}

// Upload copies a Go slice to the start of m (synchronous).
func Upload[T any](m Mem, src []T) error {
	p, n := bytesOf(src)
	if n > m.n {
		return fmt.Errorf("Upload: %d bytes into %d", n, m.n)
	}
	if n == 0 {
		return nil
	}
	return check("cudaMemcpy H2D", C.cudaMemcpy(m.p, p, C.size_t(n), C.cudaMemcpyHostToDevice))
}

// Download copies the start of m into a Go slice (synchronous).
func Download[T any](dst []T, m Mem) error {
	p, n := bytesOf(dst)
	if n > m.n {
		return fmt.Errorf("Download: %d bytes from %d", n, m.n)
	}
	if n == 0 {
		return nil
	}
	return check("cudaMemcpy D2H", C.cudaMemcpy(p, m.p, C.size_t(n), C.cudaMemcpyDeviceToHost))
}

// Stream is a CUDA stream.
type Stream struct{ s C.cudaStream_t }

// NewStream is cudaStreamCreateWithFlags(non-blocking).
func NewStream() (Stream, error) {
	var s C.cudaStream_t
	err := check("cudaStreamCreate", C.cudaStreamCreateWithFlags(&s, C.cudaStreamNonBlocking))
	return Stream{s}, err
}

// Handle is the cudaStream_t as the dds API takes it.
func (s Stream) Handle() uintptr { return uintptr(unsafe.Pointer(s.s)) }

// Sync is cudaStreamSynchronize.
func (s Stream) Sync() error { return check("cudaStreamSynchronize", C.cudaStreamSynchronize(s.s)) }

// Destroy is cudaStreamDestroy.
func (s Stream) Destroy() error { return check("cudaStreamDestroy", C.cudaStreamDestroy(s.s)) }

// DeviceSynchronize is cudaDeviceSynchronize.
func DeviceSynchronize() error {
	return check("cudaDeviceSynchronize", C.cudaDeviceSynchronize())
}

// DownloadAt copies len(dst) elements from the device address p (synchronous).
func DownloadAt[T any](dst []T, p uintptr) error {
	q, n := bytesOf(dst)
	if n == 0 {
		return nil
	}
	return check("cudaMemcpy D2H", C.ddsgo_download_at(q, C.uintptr_t(p), C.size_t(n)))
}
