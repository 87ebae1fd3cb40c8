package main

import (
	"flag"
	"math"
	"strconv"
	"strings"

	"github.com/fzsidecar/fzsidecar/fz"
)

// fieldFlags are the flags that describe a raw field and its bound, shared
// by compress and eval.
type fieldFlags struct {
	dtype, dims, mode, fill string
}

func (f *fieldFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dtype, "dtype", "", "element type: f32 or f64 (required)")
	fs.StringVar(&f.dims, "dims", "", "dimensions slowest to fastest, e.g. 100x500x500 (required)")
	fs.StringVar(&f.mode, "mode", "rel", "error-bound mode: abs, or rel (relative to max-min of the finite, non-fill values)")
	fs.StringVar(&f.fill, "fill", "", "fill value (NetCDF _FillValue, e.g. -1e34 or nan): kept exactly, left out of the range")
}

// params builds fz.Params for bound eb, reporting flag errors by name.
func (f *fieldFlags) params(fs *flag.FlagSet, eb float64) (fz.Params, error) {
	var p fz.Params
	var err error
	if f.dtype == "" {
		return p, usageErr(fs, "missing --dtype (f32 or f64)")
	}
	if p.DType, err = fz.ParseDType(f.dtype); err != nil {
		return p, usageErr(fs, "--dtype: %v", err)
	}
	if f.dims == "" {
		return p, usageErr(fs, "missing --dims (e.g. 100x500x500, slowest to fastest)")
	}
	if p.Dims, err = fz.ParseDims(f.dims); err != nil {
		return p, usageErr(fs, "--dims: %v", err)
	}
	if p.Mode, err = fz.ParseMode(f.mode); err != nil {
		return p, usageErr(fs, "--mode: %v", err)
	}
	p.Bound = eb
	if f.fill != "" {
		v, err := parseFloat(f.fill)
		if err != nil {
			return p, usageErr(fs, "--fill %q: expected a number or nan", f.fill)
		}
		p.Fill = &v
	}
	if err := p.Validate(-1); err != nil {
		return p, usageErr(fs, "%v", err)
	}
	return p, nil
}

func parseFloat(s string) (float64, error) {
	if strings.EqualFold(strings.TrimSpace(s), "nan") {
		return math.NaN(), nil
	}
	return strconv.ParseFloat(strings.TrimSpace(s), 64)
}

// parseBounds parses "1e-2,1e-3".
func parseBounds(fs *flag.FlagSet, s string) ([]float64, error) {
	if s == "" {
		return nil, usageErr(fs, "missing --eb (e.g. 1e-3)")
	}
	var out []float64
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, usageErr(fs, "--eb %q: expected positive numbers separated by commas, e.g. 1e-2,1e-3", part)
		}
		out = append(out, v)
	}
	return out, nil
}
