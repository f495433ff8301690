//go:build !dds_pkgconfig

package dds

// Default build flags: the header from this repository, libdds from the linker's search path.
// Point the linker at a build directory with CGO_LDFLAGS="-L$DDS_LIB_DIR -Wl,-rpath,$DDS_LIB_DIR"
// (see README.md), or build with -tags dds_pkgconfig to take both flags from `pkg-config dds`.

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: -ldds
import "C"
