package fz

import (
	"fmt"
	"math"
)

// Quality compares a decoded field with its original.
type Quality struct {
	Values     uint64  // values compared
	Finite     uint64  // finite, non-fill values (the ones the bound covers)
	MaxAbsErr  float64 // over finite non-fill values
	PSNR       float64 // dB, value range over RMSE (finite non-fill values); +Inf if exact
	Violations uint64  // values off the bound, or specials/fill not bit-exact
	FirstBad   int64   // index of the first violation, −1 if none
}

// Verify checks decoded against orig (both raw little-endian fields of
// h's dtype) under h's bound: |x − x'| ≤ AbsEB for finite non-fill values,
// bit-exact NaN, ±Inf and fill values.
func Verify(h *Header, orig, decoded []byte) (Quality, error) {
	if len(orig) != len(decoded) || uint64(len(orig)) != h.RawSize() {
		return Quality{}, fmt.Errorf("verify: original is %d bytes, decoded %d, header says %d", len(orig), len(decoded), h.RawSize())
	}
	if h.DType == Float32 {
		return verifyTyped(asFloats[float32](orig), asFloats[float32](decoded), h), nil
	}
	return verifyTyped(asFloats[float64](orig), asFloats[float64](decoded), h), nil
}

func verifyTyped[T float](a, b []T, h *Header) Quality {
	q := Quality{Values: uint64(len(a)), FirstBad: -1}
	var sse float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, x := range a {
		y := b[i]
		if x-x != 0 || (h.Fill != nil && bitsOf(x) == h.FillBits) {
			if bitsOf(x) != bitsOf(y) {
				q.Violations++
				if q.FirstBad < 0 {
					q.FirstBad = int64(i)
				}
			}
			continue
		}
		q.Finite++
		e := math.Abs(float64(x) - float64(y))
		if !(e <= h.AbsEB) {
			q.Violations++
			if q.FirstBad < 0 {
				q.FirstBad = int64(i)
			}
		}
		q.MaxAbsErr = max(q.MaxAbsErr, e)
		sse += e * e
		lo, hi = min(lo, float64(x)), max(hi, float64(x))
	}
	switch {
	case q.Finite == 0 || sse == 0:
		q.PSNR = math.Inf(1)
	default:
		q.PSNR = 20*math.Log10(hi-lo) - 10*math.Log10(sse/float64(q.Finite))
	}
	return q
}
