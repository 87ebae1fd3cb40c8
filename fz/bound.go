package fz

import (
	"fmt"
	"math"
)

// DeriveBound returns the absolute bound and quantization step that
// Compress stores for p (docs/FORMAT.md §8), given the range [lo, hi] of
// the field's finite non-fill values (have false: there are none, and lo
// and hi are not used). Every backend derives them here, so CPU and GPU
// containers agree bit for bit.
//
// In rel mode the bound is rel ⊗ (hi ⊖ lo), each operation rounded to the
// nearest float64 as if the exponent were unbounded: when hi − lo exceeds
// the largest float64 (values near ±1e308) it is still the exact rounded
// product, not +Inf. A bound that itself exceeds the largest float64 is
// refused: no container ever holds an infinite bound.
func DeriveBound(p Params, lo, hi float64, have bool) (absEB, step float64, err error) {
	if !(p.Bound > 0) || math.IsInf(p.Bound, 0) {
		return 0, 0, fmt.Errorf("invalid error bound %v: expected a finite number > 0", p.Bound)
	}
	absEB = p.Bound
	if p.Mode == Rel {
		if !have {
			lo, hi = 0, 0
		}
		if absEB, err = relBound(p.Bound, lo, hi); err != nil {
			return 0, 0, err
		}
	}
	step = float64(2 * absEB)
	if absEB == 0 {
		// A constant field under a relative bound: the bound is 0, so every
		// value must come back exactly. With step = |c|, q = ±1 rebuilds c
		// exactly and costs almost nothing.
		step = 1
		if have && lo != 0 {
			step = math.Abs(lo)
		}
	}
	if math.IsInf(step, 0) {
		// Any step keeps the bound (every value is checked); this one
		// keeps 1/step a normal-enough number.
		step = math.MaxFloat64
	}
	return absEB, step, nil
}

// relBound is rel·(hi − lo) as DeriveBound defines it, for finite lo ≤ hi.
func relBound(rel, lo, hi float64) (float64, error) {
	d := float64(hi - lo)
	eb := float64(rel * d)
	if math.IsInf(d, 0) {
		// hi − lo > MaxFloat64: then |hi| and |lo| are far above the
		// subnormals, so hi/2 and lo/2 are exact, hi/2 − lo/2 is exactly
		// half of the unbounded rounded difference, and rel·that (≥ 4e-16
		// here, a normal number) is exactly half the unbounded rounded
		// product; doubling it is exact unless the bound itself overflows.
		eb = 2 * float64(rel*float64(hi/2-lo/2))
	}
	if math.IsInf(eb, 0) || math.IsNaN(eb) {
		return 0, fmt.Errorf("rel bound %g × the value range (max %g − min %g) exceeds the largest float64 (%g): "+
			"use a rel bound below %.3g, or an abs bound",
			rel, hi, lo, math.MaxFloat64, math.MaxFloat64/2/float64(hi/2-lo/2))
	}
	return eb, nil
}

// checkBound enforces §8 on an untrusted header: a finite bound > 0, a
// range either not computed (both NaN) or, in rel mode, finite with
// min ≤ max, abs_eb equal to what DeriveBound gives for them, and a
// finite step > 0.
func (h *Header) checkBound() error {
	if !(h.Bound > 0) || math.IsInf(h.Bound, 0) {
		return formatErr("header field bound = %v, expected a finite number > 0", h.Bound)
	}
	if !(h.Step > 0) || math.IsInf(h.Step, 0) {
		return formatErr("header field step = %v, expected a finite number > 0", h.Step)
	}
	lo, hi := h.RangeMin, h.RangeMax
	have := false
	switch {
	case math.IsNaN(lo) && math.IsNaN(hi):
	case math.IsNaN(lo) || math.IsNaN(hi):
		return formatErr("header fields range_min = %v, range_max = %v: expected both NaN (not computed) or both finite", lo, hi)
	case h.Mode != Rel:
		return formatErr("header fields range_min = %v, range_max = %v in abs mode: expected NaN (not computed)", lo, hi)
	case math.IsInf(lo, 0) || math.IsInf(hi, 0) || !(lo <= hi):
		return formatErr("header fields range_min = %v, range_max = %v: expected finite values with min <= max", lo, hi)
	default:
		have = true
	}
	want, _, err := DeriveBound(Params{Mode: h.Mode, Bound: h.Bound}, lo, hi, have)
	if err != nil {
		return formatErr("header field bound: %v", err)
	}
	if math.Float64bits(h.AbsEB) != math.Float64bits(want) {
		return formatErr("header field abs_eb = %v, but %v bound %v over range [%v, %v] gives %v (docs/FORMAT.md section 8)",
			h.AbsEB, h.Mode, h.Bound, lo, hi, want)
	}
	return nil
}
