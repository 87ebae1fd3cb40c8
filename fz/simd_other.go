//go:build !amd64

package fz

// No vector kernels on this architecture: useSIMD stays false and the
// stubs below are never reached.
const haveAVX2 = false

func quantF32AVX2(src *float32, rowStride, planeStride, lz, ly, lx, nv int, exc *[excWords]uint64, q *[TileElems]int32, k *quantK, pf int) (maxErr float64) {
	panic("unreachable")
}

func quantF64AVX2(src *float64, rowStride, planeStride, lz, ly, lx, nv int, exc *[excWords]uint64, q *[TileElems]int32, k *quantK, pf int) (maxErr float64) {
	panic("unreachable")
}

func codesAVX2(q *int32, lz, ly, lx, n8 int, smap *[TileElems]uint16, lo, hi *[TileElems]byte, zero *[TileElems]int32) (or, esc uint32) {
	panic("unreachable")
}

func shuffleAVX2(b *[TileElems]byte, planes *[8][planeBytes]byte)   { panic("unreachable") }
func shuffleTopAVX2(b *[TileElems]byte, plane *[planeBytes]byte)    { panic("unreachable") }
func unshuffleAVX2(planes *[8][planeBytes]byte, b *[TileElems]byte) { panic("unreachable") }
func unshuffleTopAVX2(plane *[planeBytes]byte, b *[TileElems]byte)  { panic("unreachable") }

func gatherAVX2(lo, hi *[TileElems]byte, smap *[TileElems]uint16, rows, lx, n8 int, q *int32) (esc uint32) {
	panic("unreachable")
}

func lorenzoDeqF32AVX2(q *[TileElems]int32, brow, zero *[TileElems]int32, lz, ly, lx int, dst *float32, rowStride, planeStride int, step float64, pf int) {
	panic("unreachable")
}

func lorenzoDeqF64AVX2(q *[TileElems]int32, brow, zero *[TileElems]int32, lz, ly, lx int, dst *float64, rowStride, planeStride int, step float64, pf int) {
	panic("unreachable")
}

func rangeF32AVX2(src *float32, n int, fill uint64, hasFill bool) (lo, hi float32) {
	panic("unreachable")
}

func rangeF64AVX2(src *float64, n int, fill uint64, hasFill bool) (lo, hi float64) {
	panic("unreachable")
}

const haveBMI2 = false

func packSignsBMI2(nz *[v2Groups]uint16, sign *[planeBytes]byte, out *[signBufWords]uint32) {
	panic("unreachable")
}

func expandSignsBMI2(nz *[v2Groups]uint16, in *[signBufWords + 1]uint32, sign *[planeBytes]byte) {
	panic("unreachable")
}

func gatherUnitsAsm(pf *[Planes * planeBytes]byte, rates *[v2Groups]uint16, out *byte) {
	panic("unreachable")
}

func scatterUnitsAsm(units *byte, rw *[v2Blocks]uint32, pf *[Planes * planeBytes]byte, nz, esc *[v2Groups]uint16) (nsign, badGroup int) {
	panic("unreachable")
}
