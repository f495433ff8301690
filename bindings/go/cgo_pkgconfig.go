//go:build dds_pkgconfig

package dds

// With -tags dds_pkgconfig the header and library come from an installed dds (dds.pc).

// #cgo pkg-config: dds
import "C"
