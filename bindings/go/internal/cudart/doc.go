// Package cudart is the few CUDA runtime calls that the GPU tests need (build tag cuda):
// device count, malloc/free, copies, streams. Without the tag it is empty and Available
// reports false, so the package builds everywhere.
package cudart
