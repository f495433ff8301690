// Package cmem allocates C memory for tests of the raw-pointer entry points (SampleDevice and
// StashLogprobsDevice on the CPU backend). Test files cannot use cgo themselves.
package cmem

// #include <stdlib.h>
// #include <string.h>
import "C"

import "unsafe"

// Buf is n bytes of C memory (calloc'ed).
type Buf struct {
	P unsafe.Pointer
	N int
}

// Alloc returns n zeroed bytes of C memory; Free must release them.
func Alloc(n int) Buf {
	if n < 1 {
		n = 1
	}
	return Buf{P: C.calloc(C.size_t(n), 1), N: n}
}

// Free releases the memory.
func (b *Buf) Free() {
	C.free(b.P)
	b.P = nil
}

// Addr is the address as the raw-pointer API takes it.
func (b Buf) Addr() uintptr { return uintptr(b.P) }

// Float32s views the memory as float32s.
func (b Buf) Float32s() []float32 { return unsafe.Slice((*float32)(b.P), b.N/4) }

// Int32s views the memory as int32s.
func (b Buf) Int32s() []int32 { return unsafe.Slice((*int32)(b.P), b.N/4) }

// Uint16s views the memory as uint16s.
func (b Buf) Uint16s() []uint16 { return unsafe.Slice((*uint16)(b.P), b.N/2) }

// Bytes views the memory as bytes.
func (b Buf) Bytes() []byte { return unsafe.Slice((*byte)(b.P), b.N) }
