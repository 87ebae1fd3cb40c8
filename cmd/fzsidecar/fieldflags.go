package main

import (
	"flag"
	"fmt"
	"io"
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
	fs.StringVar(&f.fill, "fill", "", "fill value (NetCDF _FillValue, e.g. -1e34 or nan): kept exactly, left out of the range. Without it, a value at the edge of the range that looks like a fill (|v| >= 1e30, or over 5% of the values, far from the rest) gets a warning")
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

// warnSuspectFill tells w (stderr) when a value of data looks like a fill
// value the user did not declare (fz.DetectFill: a detached edge value of
// magnitude ≥ 1e30 or over 5% of the values), and returns it.
func warnSuspectFill(w io.Writer, name string, data []byte, p fz.Params) (fz.SuspectFill, bool) {
	s, ok := fz.DetectFill(data, p)
	if !ok {
		return s, false
	}
	edge := "minimum"
	if s.AtMax {
		edge = "maximum"
	}
	effect := "it is not kept exactly"
	if math.Abs(s.Value) >= (1<<28)*2*p.Bound {
		// Beyond the codec's 2^28 quantization steps of 2·bound: raw.
		effect = "every occurrence is stored raw, at full size (declared, it would cost almost nothing)"
	}
	if p.Mode == fz.Rel {
		effect = "it stretches the value range, so the rel bound grows with it and the real values may come back far off"
	}
	fmt.Fprintf(w, "warning: %s: %s, the field's %s (%d values, %.3g%%), looks like a fill value (%s) but is compressed as data: %s. "+
		"If it marks missing data, pass --fill %s\n", name, formatValue(s.Value, p.DType), edge, s.Count, 100*s.Share, s.Reason, effect,
		formatValue(s.Value, p.DType))
	return s, true
}

// warnExpansion tells w when the output came out larger than the input
// (fz.ExpansionWarning).
func warnExpansion(w io.Writer, name string, data []byte, p fz.Params, st fz.Stats) {
	if msg := fz.ExpansionWarning(data, p, st); msg != "" {
		fmt.Fprintf(w, "warning: %s at %s bound %g: %s\n", name, p.Mode, p.Bound, msg)
	}
}

// formatValue prints v as short as its dtype allows (-1e+34, not
// -1.0000000133217297e+34 for a float32).
func formatValue(v float64, dt fz.DType) string {
	if dt == fz.Float32 {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
