package fz

import "golang.org/x/sys/cpu"

// haveAVX2 selects the AVX2 kernels of simd_amd64.s. Every kernel has a
// pure-Go twin that produces the same bytes; tests flip useSIMD to cover
// both paths on any machine.
var haveAVX2 = cpu.X86.HasAVX2

// The kernels below are documented next to their callers in simd.go; they
// read and write only inside the arrays and counts they are given, which
// the callers check before the call.

//go:noescape
func quantF32AVX2(src *float32, rowStride, planeStride, lz, ly, lx, nv int, exc *[excWords]uint64, q *[TileElems]int32, k *quantK, pf int) (maxErr float64)

//go:noescape
func quantF64AVX2(src *float64, rowStride, planeStride, lz, ly, lx, nv int, exc *[excWords]uint64, q *[TileElems]int32, k *quantK, pf int) (maxErr float64)

//go:noescape
func codesAVX2(q *int32, lz, ly, lx, n8 int, smap *[TileElems]uint16, lo, hi *[TileElems]byte, zero *[TileElems]int32) (or, esc uint32)

//go:noescape
func shuffleAVX2(b *[TileElems]byte, planes *[8][planeBytes]byte)

//go:noescape
func shuffleTopAVX2(b *[TileElems]byte, plane *[planeBytes]byte)

//go:noescape
func unshuffleAVX2(planes *[8][planeBytes]byte, b *[TileElems]byte)

//go:noescape
func unshuffleTopAVX2(plane *[planeBytes]byte, b *[TileElems]byte)

//go:noescape
func gatherAVX2(lo, hi *[TileElems]byte, smap *[TileElems]uint16, rows, lx, n8 int, q *int32) (esc uint32)

//go:noescape
func lorenzoDeqF32AVX2(q *[TileElems]int32, brow, zero *[TileElems]int32, lz, ly, lx int, dst *float32, rowStride, planeStride int, step float64, pf int)

//go:noescape
func lorenzoDeqF64AVX2(q *[TileElems]int32, brow, zero *[TileElems]int32, lz, ly, lx int, dst *float64, rowStride, planeStride int, step float64, pf int)

//go:noescape
func rangeF32AVX2(src *float32, n int, fill uint64, hasFill bool) (lo, hi float32)

//go:noescape
func rangeF64AVX2(src *float64, n int, fill uint64, hasFill bool) (lo, hi float64)

// haveBMI2 selects the PEXT/PDEP kernels of signs_amd64.s (with useSIMD).
var haveBMI2 = cpu.X86.HasBMI2

//go:noescape
func packSignsBMI2(nz *[v2Groups]uint16, sign *[planeBytes]byte, out *[signBufWords]uint32)

//go:noescape
func expandSignsBMI2(nz *[v2Groups]uint16, in *[signBufWords + 1]uint32, sign *[planeBytes]byte)

//go:noescape
func gatherUnitsAsm(pf *[Planes * planeBytes]byte, rates *[v2Groups]uint16, out *byte)

//go:noescape
func scatterUnitsAsm(units *byte, rw *[v2Blocks]uint32, pf *[Planes * planeBytes]byte, nz, esc *[v2Groups]uint16) (nsign, badGroup int)
