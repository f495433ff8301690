//go:build !cuda

package cudart

// Available reports whether this build links the CUDA runtime (build tag cuda).
const Available = false
