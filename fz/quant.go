package fz

import (
	"unsafe"
)

type float interface{ ~float32 | ~float64 }

// rintMagic rounds to nearest-even by addition: for |v| < 2^51,
// (v + 1.5·2^52) − 1.5·2^52 is v rounded to an integer, with the same
// result on every IEEE-754 machine (CPU or GPU) as long as each operation
// is rounded on its own (no fused multiply-add).
const rintMagic = 6755399441055744.0

// quantizer holds the per-field constants of pre-quantization.
type quantizer struct {
	step     float64 // reconstruction step: x' = q·step
	inv      float64 // 1/step
	eb       float64 // absolute bound checked for every value
	hasFill  bool
	fillBits uint64
}

func bitsOf[T float](x T) uint64 {
	if unsafe.Sizeof(x) == 4 {
		return uint64(*(*uint32)(unsafe.Pointer(&x)))
	}
	return *(*uint64)(unsafe.Pointer(&x))
}

func fromBits[T float](b uint64) T {
	var x T
	if unsafe.Sizeof(x) == 4 {
		u := uint32(b)
		return *(*T)(unsafe.Pointer(&u))
	}
	return *(*T)(unsafe.Pointer(&b))
}

// reconstruct is the decoder's value for q.
func reconstruct[T float](q int32, step float64) T {
	return T(float64(float64(q) * step))
}
