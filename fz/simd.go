package fz

// useSIMD routes the hot stages through the vector kernels when the CPU
// has them. Tests set it to false to exercise the pure-Go reference path,
// which defines every output byte.
var useSIMD = haveAVX2

// excWords is the size of the per-tile exception bitmap (one bit per element).
const excWords = TileElems / 64

// quantK is the quantizer as the kernels read it (field offsets are used
// by simd_amd64.s: inv 0, step 8, eb 16, fill 24, fillOn 32).
type quantK struct {
	inv, step, eb float64
	fill          uint64 // fill bits (float32: low 32 bits)
	fillOn        uint64 // 1 when the field has a fill value
}
