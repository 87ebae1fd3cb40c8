package fz

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Checks a tool runs around Compress to tell its user about likely
// mistakes: an undeclared fill value, and a bound so small that the output
// grows. They never change what Compress does.

// FillMagnitude is the magnitude from which an edge value that stands apart
// from the others looks like a fill value (NetCDF's default 9.97e36, the
// common -1e34, 1e30, ...).
const FillMagnitude = 1e30

// FillShare is the share of the values from which an edge value that stands
// apart from the others looks like a fill value (a land mask, -999).
const FillShare = 0.05

// SuspectFill is a value that looks like an undeclared fill.
type SuspectFill struct {
	Value float64 // in the field's dtype
	Count uint64  // elements holding it
	Share float64 // Count / the finite elements that are not a declared fill
	AtMax bool    // it is the field's maximum (else its minimum)
	// Reason says why, for a message: "magnitude ≥ 1e30" or "12.5% of the values".
	Reason string
}

// DetectFill looks in src (raw little-endian values of p.DType; values
// equal to p.Fill are skipped) for an undeclared fill value: the minimum
// or the maximum of the finite values when it stands apart from the rest
// (the gap to the nearest other value is larger than the span of all the
// others, so it more than doubles the value range) and either its
// magnitude is at least FillMagnitude or it holds at least FillShare of
// the values (the others then spanning a non-zero range). ok is false when
// neither edge qualifies. With two candidates, the one of larger magnitude
// class (then larger count) is returned. Cost: one parallel pass.
func DetectFill(src []byte, p Params) (s SuspectFill, ok bool) {
	var e edges
	switch p.DType {
	case Float32:
		e = edgesOf(asFloats[float32](src), p)
	case Float64:
		e = edgesOf(asFloats[float64](src), p)
	default:
		return s, false
	}
	if e.n == 0 || e.lo == e.hi {
		return s, false
	}
	cands := []SuspectFill{}
	// lo stands apart from [lo2, hi]; hi from [lo, hi2].
	if c, ok := judgeEdge(e.lo, e.cLo, e.lo2-e.lo, e.hi-e.lo2, e.n, false); ok {
		cands = append(cands, c)
	}
	if c, ok := judgeEdge(e.hi, e.cHi, e.hi-e.hi2, e.hi2-e.lo, e.n, true); ok {
		cands = append(cands, c)
	}
	for _, c := range cands {
		if !ok || moreLikelyFill(c, s) {
			s, ok = c, true
		}
	}
	return s, ok
}

// moreLikelyFill orders candidates: a huge magnitude first, then the
// larger count.
func moreLikelyFill(a, b SuspectFill) bool {
	if ha, hb := math.Abs(a.Value) >= FillMagnitude, math.Abs(b.Value) >= FillMagnitude; ha != hb {
		return ha
	}
	return a.Count > b.Count
}

// judgeEdge applies DetectFill's rule to one edge value v held by count
// of n values, gap away from the others, which span span.
func judgeEdge(v float64, count uint64, gap, span float64, n uint64, atMax bool) (SuspectFill, bool) {
	s := SuspectFill{Value: v, Count: count, Share: float64(count) / float64(n), AtMax: atMax}
	if !(gap > span) {
		return s, false
	}
	switch {
	case math.Abs(v) >= FillMagnitude:
		s.Reason = fmt.Sprintf("magnitude ≥ %g", FillMagnitude)
	case s.Share >= FillShare && span > 0:
		s.Reason = fmt.Sprintf("%.3g%% of the values", 100*s.Share)
	default:
		return s, false
	}
	return s, true
}

// edges are the extremes of the finite non-fill values: lo with its count
// and the next larger distinct value lo2 (+Inf if none), likewise hi, hi2.
type edges struct {
	n                uint64
	lo, lo2, hi, hi2 float64
	cLo, cHi         uint64
}

func edgesOf[T float](v []T, p Params) edges {
	fillBits, hasFill := FillBits(p)
	workers := min(runtime.GOMAXPROCS(0), max(1, len(v)/(1<<16)))
	parts := make([]edges, workers)
	per := (len(v) + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range parts {
		s := v[min(w*per, len(v)):min((w+1)*per, len(v))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Locals, not an edges struct: they stay in registers.
			var n, cLo, cHi uint64
			lo, lo2, hi, hi2 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
			for _, t := range s {
				x := float64(t)
				// Fast path, nearly every value: strictly inside the
				// second-extreme values (false for NaN).
				if x > lo2 && x < hi2 && (!hasFill || bitsOf(t) != fillBits) {
					n++
					continue
				}
				if t-t != 0 || hasFill && bitsOf(t) == fillBits {
					continue
				}
				n++
				switch {
				case x < lo:
					lo2, lo, cLo = lo, x, 1
				case x == lo:
					cLo++
				case x < lo2:
					lo2 = x
				}
				switch {
				case x > hi:
					hi2, hi, cHi = hi, x, 1
				case x == hi:
					cHi++
				case x > hi2:
					hi2 = x
				}
			}
			parts[w] = edges{n: n, lo: lo, lo2: lo2, hi: hi, hi2: hi2, cLo: cLo, cHi: cHi}
		}()
	}
	wg.Wait()
	m := edges{lo: math.Inf(1), lo2: math.Inf(1), hi: math.Inf(-1), hi2: math.Inf(-1)}
	for _, e := range parts {
		if e.n == 0 {
			continue
		}
		m.n += e.n
		switch {
		case e.lo < m.lo:
			m.lo2, m.lo, m.cLo = min(m.lo, e.lo2), e.lo, e.cLo
		case e.lo == m.lo:
			m.cLo += e.cLo
			m.lo2 = min(m.lo2, e.lo2)
		default:
			m.lo2 = min(m.lo2, e.lo)
		}
		switch {
		case e.hi > m.hi:
			m.hi2, m.hi, m.cHi = max(m.hi, e.hi2), e.hi, e.cHi
		case e.hi == m.hi:
			m.cHi += e.cHi
			m.hi2 = max(m.hi2, e.hi2)
		default:
			m.hi2 = max(m.hi2, e.hi)
		}
	}
	return m
}

// ErrorWithout is the error of decoded against orig (raw fields of h's
// dtype) over the finite values that are neither h's fill nor v (a
// SuspectFill's value): what the field's error would look like had v been
// declared as fill.
type ErrorWithout struct {
	Values    uint64  // values compared
	MaxAbsErr float64 // largest |x − x'| over them
	Lo, Hi    float64 // their range (NaN when Values is 0)
	// AbsEB is the bound the user meant with v as fill: h's bound in abs
	// mode; in rel mode the bound over [Lo, Hi] (DeriveBound; +Inf when
	// that overflows).
	AbsEB float64
}

// MeasureWithout computes ErrorWithout for v.
func MeasureWithout(h *Header, orig, decoded []byte, v float64) (ErrorWithout, error) {
	if len(orig) != len(decoded) || uint64(len(orig)) != h.RawSize() {
		return ErrorWithout{}, fmt.Errorf("measure: original is %d bytes, decoded %d, header says %d", len(orig), len(decoded), h.RawSize())
	}
	var r ErrorWithout
	if h.DType == Float32 {
		r = measureWithout(asFloats[float32](orig), asFloats[float32](decoded), h, v)
	} else {
		r = measureWithout(asFloats[float64](orig), asFloats[float64](decoded), h, v)
	}
	var err error
	if r.AbsEB, _, err = DeriveBound(Params{Mode: h.Mode, Bound: h.Bound}, r.Lo, r.Hi, r.Values > 0); err != nil {
		r.AbsEB = math.Inf(1)
	}
	return r, nil
}

func measureWithout[T float](a, b []T, h *Header, v float64) ErrorWithout {
	skip := bitsOf(T(v))
	r := ErrorWithout{Lo: math.Inf(1), Hi: math.Inf(-1)}
	for i, x := range a {
		if x-x != 0 || bitsOf(x) == skip || h.Fill != nil && bitsOf(x) == h.FillBits {
			continue
		}
		r.Values++
		r.MaxAbsErr = max(r.MaxAbsErr, math.Abs(float64(x)-float64(b[i])))
		r.Lo, r.Hi = min(r.Lo, float64(x)), max(r.Hi, float64(x))
	}
	if r.Values == 0 {
		r.Lo, r.Hi = math.NaN(), math.NaN()
	}
	return r
}

// ExpansionWarning explains a compression whose output is larger than its
// input (st from Compress of src under p), or returns "" when it is not.
// When the bound is below the data's precision (half the spacing of dtype
// values at the largest finite magnitude) it says so: nearly every value
// then fails quantization and is stored raw.
func ExpansionWarning(src []byte, p Params, st Stats) string {
	if st.CompressedBytes <= st.RawBytes || st.RawBytes == 0 {
		return ""
	}
	n := st.RawBytes / uint64(max(1, p.DType.Size()))
	msg := fmt.Sprintf("the output (%d bytes) is larger than the input (%d bytes): %d of %d values were stored raw",
		st.CompressedBytes, st.RawBytes, st.Outliers, n)
	var big float64
	switch p.DType {
	case Float32:
		big = maxMagnitude(asFloats[float32](src), p)
	case Float64:
		big = maxMagnitude(asFloats[float64](src), p)
	}
	// The spacing just below big (above it may be +Inf).
	spacing := big - math.Nextafter(big, 0)
	if p.DType == Float32 {
		spacing = float64(float32(big) - math.Nextafter32(float32(big), 0))
	}
	// A value is quantized only when the bound is at least half its
	// spacing and it lies within qLimit steps (of 2·bound) of 0.
	floor := max(spacing/2, big/(2*qLimit))
	if big > 0 && st.AbsEB < floor {
		msg += fmt.Sprintf("; the absolute bound %g is below the data's precision for this codec (%s values near %.6g are %.3g apart, "+
			"and a value may be at most 2^28 steps of 2×bound from 0): use a bound of at least %.3g, or a lossless compressor",
			st.AbsEB, p.DType, big, spacing, 2*floor)
	}
	return msg
}

// maxMagnitude is the largest |x| over the finite values that are not p's
// fill.
func maxMagnitude[T float](v []T, p Params) float64 {
	fillBits, hasFill := FillBits(p)
	var m float64
	for _, x := range v {
		if x-x == 0 && !(hasFill && bitsOf(x) == fillBits) {
			m = max(m, math.Abs(float64(x)))
		}
	}
	return m
}
