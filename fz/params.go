package fz

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DType is the element type of a field.
type DType uint8

const (
	Float32 DType = 1
	Float64 DType = 2
)

// Size returns the size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case Float32:
		return 4
	case Float64:
		return 8
	}
	return 0
}

func (d DType) String() string {
	switch d {
	case Float32:
		return "f32"
	case Float64:
		return "f64"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType accepts f32, float32, f64 and float64.
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "f32", "float32":
		return Float32, nil
	case "f64", "float64":
		return Float64, nil
	}
	return 0, fmt.Errorf("unknown dtype %q: expected f32 or f64", s)
}

// Mode says how the error bound is interpreted.
type Mode uint8

const (
	// Abs: the bound is an absolute error.
	Abs Mode = 1
	// Rel: the bound is relative to the value range (max − min) over the
	// finite, non-fill values.
	Rel Mode = 2
)

func (m Mode) String() string {
	switch m {
	case Abs:
		return "abs"
	case Rel:
		return "rel"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode accepts abs and rel.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "abs":
		return Abs, nil
	case "rel":
		return Rel, nil
	}
	return 0, fmt.Errorf("unknown error-bound mode %q: expected abs or rel", s)
}

// MaxDims is the largest number of dimensions a field may have.
const MaxDims = 16

// ParseDims parses "100x500x500" (slowest → fastest, C order).
func ParseDims(s string) ([]uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty dims: expected e.g. 100x500x500 (slowest to fastest)")
	}
	parts := strings.Split(strings.ToLower(s), "x")
	if len(parts) > MaxDims {
		return nil, fmt.Errorf("dims %q has %d dimensions: at most %d are supported", s, len(parts), MaxDims)
	}
	dims := make([]uint64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("dims %q: dimension %d (%q) is not a non-negative integer: expected e.g. 100x500x500", s, i, p)
		}
		dims[i] = v
	}
	if _, err := NumElements(dims); err != nil {
		return nil, err
	}
	return dims, nil
}

// FormatDims is the inverse of ParseDims.
func FormatDims(dims []uint64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return strings.Join(parts, "x")
}

// MaxElements bounds the element count so that byte sizes of either dtype
// fit in an int64.
const MaxElements = uint64(1) << 59

// NumElements returns the product of dims, or an error on overflow.
func NumElements(dims []uint64) (uint64, error) {
	if len(dims) == 0 {
		return 0, fmt.Errorf("no dims given: expected at least one dimension")
	}
	n := uint64(1)
	for _, d := range dims {
		if d == 0 {
			return 0, nil
		}
		if n > MaxElements/d {
			return 0, fmt.Errorf("dims %s hold more than 2^59 elements", FormatDims(dims))
		}
		n *= d
	}
	return n, nil
}

// Params describe a field and the error bound to compress it with.
type Params struct {
	DType DType
	Dims  []uint64 // slowest → fastest
	Mode  Mode
	Bound float64
	// Fill, when set, marks elements equal (bit for bit in DType) to this
	// value as missing: they round-trip exactly and are left out of the
	// value range.
	Fill *float64
}

// Validate checks p against a raw input of n bytes (n < 0: unknown).
func (p *Params) Validate(n int64) error {
	if p.DType.Size() == 0 {
		return fmt.Errorf("invalid dtype %v: expected f32 or f64", p.DType)
	}
	if p.Mode != Abs && p.Mode != Rel {
		return fmt.Errorf("invalid error-bound mode %v: expected abs or rel", p.Mode)
	}
	if !(p.Bound > 0) || math.IsInf(p.Bound, 0) {
		return fmt.Errorf("invalid error bound %v: expected a finite number > 0", p.Bound)
	}
	if len(p.Dims) > MaxDims {
		return fmt.Errorf("%d dims: at most %d are supported", len(p.Dims), MaxDims)
	}
	elems, err := NumElements(p.Dims)
	if err != nil {
		return err
	}
	if p.Fill != nil && p.DType == Float32 {
		f := *p.Fill
		// The fill is compared in the field's type: -1e34 means float32(-1e34).
		if !math.IsInf(f, 0) && math.IsInf(float64(float32(f)), 0) {
			return fmt.Errorf("fill value %v is outside the float32 range", f)
		}
	}
	if n >= 0 && uint64(n) != elems*uint64(p.DType.Size()) {
		return fmt.Errorf("input is %d bytes but dims %s of %s need %d bytes (%d elements × %d)",
			n, FormatDims(p.Dims), p.DType, elems*uint64(p.DType.Size()), elems, p.DType.Size())
	}
	return nil
}
