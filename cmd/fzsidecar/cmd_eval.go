package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/synth"
)

func init() {
	register(&command{name: "eval", summary: "compress, decompress and verify fields at several bounds; print ratio, error and speed", run: runEval})
}

type evalRow struct {
	File           string  `json:"file"`
	Mode           string  `json:"mode"`
	EB             float64 `json:"eb"`
	AbsEB          float64 `json:"abs_eb"`
	Ratio          float64 `json:"ratio"`
	BitsPerValue   float64 `json:"bits_per_value"`
	PSNR           float64 `json:"psnr"`
	MaxAbsErr      float64 `json:"max_abs_err"`
	MaxErrOverEB   float64 `json:"max_err_over_eb"`
	CompressGBps   float64 `json:"compress_gbps"`
	DecompressGBps float64 `json:"decompress_gbps"`
	Backend        string  `json:"backend"`
	FormatVersion  uint16  `json:"format_version"` // of the container measured
	Tiling         string  `json:"tiling"`         // of the container measured: boxes, flat or padded (auto resolved)
	Violations     uint64  `json:"violations"`
	// With a value that looks like an undeclared fill (fz.DetectFill): the
	// value, its share, and the error over the other values against the
	// bound they alone give (what --fill VALUE would have meant).
	SuspectFill             *float64 `json:"suspect_fill,omitempty"`
	SuspectFillShare        *float64 `json:"suspect_fill_share,omitempty"`
	MaxAbsErrWithoutFill    *float64 `json:"max_abs_err_without_fill,omitempty"`
	MaxErrOverEBWithoutFill *float64 `json:"max_err_over_eb_without_fill,omitempty"`
}

func runEval(ctx context.Context, args []string) error {
	fs := newFlags("eval", "eval --dtype f32 --dims D [--mode rel] --eb 1e-2,1e-3,1e-4 [--fill V] [--json] [--backend auto|cpu|gpu] [--format-version 1|2] [--tiling boxes|flat|auto|padded] FILE...\n       fzsidecar eval --synthetic 256x256x256 [--eb ...]   (a generated smooth float32 field)")
	var ff fieldFlags
	ff.register(fs)
	ebs := fs.String("eb", "1e-2,1e-3,1e-4", "error bounds, comma-separated")
	asJSON := fs.Bool("json", false, "one JSON object per (file, bound) per line")
	be := fs.String("backend", "auto", "codec backend: auto, cpu or gpu")
	workers := fs.Int("workers", 0, "CPU worker count (default: all cores)")
	repeat := fs.Int("repeat", 3, "timed runs per measurement; the median is reported")
	synthetic := fs.String("synthetic", "", "evaluate a generated smooth float32 field of these dims instead of files")
	version := formatVersionFlag(fs)
	tiling := tilingFlag(fs)
	fs.Lookup("dtype").Usage = "element type: f32 or f64 (required with FILEs)"
	fs.Lookup("dims").Usage = "dimensions slowest to fastest, e.g. 100x500x500 (required with FILEs)"
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	bounds, err := parseBounds(fs, *ebs)
	if err != nil {
		return err
	}
	if *repeat < 1 {
		return usageErr(fs, "--repeat %d: expected at least 1", *repeat)
	}
	type input struct {
		name    string
		data    []byte
		p       fz.Params
		suspect *fz.SuspectFill
	}
	var inputs []input
	switch {
	case *synthetic != "":
		if len(pos) > 0 {
			return usageErr(fs, "give either --synthetic or files, not both")
		}
		dims, err := fz.ParseDims(*synthetic)
		if err != nil || len(dims) != 3 {
			return usageErr(fs, "--synthetic %q: expected three dims like 256x256x256", *synthetic)
		}
		mode, err := fz.ParseMode(ff.mode)
		if err != nil {
			return usageErr(fs, "--mode: %v", err)
		}
		v := synth.Smooth(int(dims[0]), int(dims[1]), int(dims[2]), 0)
		data := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
		inputs = append(inputs, input{"synthetic-smooth-" + *synthetic, data, fz.Params{DType: fz.Float32, Dims: dims, Mode: mode}, nil})
	case len(pos) == 0:
		return usageErr(fs, "expected at least one FILE (or --synthetic DIMS)")
	default:
		p, err := ff.params(fs, bounds[0])
		if err != nil {
			return err
		}
		for _, path := range pos {
			in, err := openInput(path)
			if err != nil {
				return err
			}
			defer in.Close()
			if err := p.Validate(int64(len(in.data))); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			var suspect *fz.SuspectFill
			if sf, ok := warnSuspectFill(os.Stderr, path, in.data, p); ok {
				suspect = &sf
			}
			inputs = append(inputs, input{path, in.data, p, suspect})
		}
	}
	opts, bname, err := selectBackend(*be)
	if err != nil {
		return err
	}
	opts = append(opts, fz.WithWorkers(*workers), fz.WithFormatVersion(*version), fz.WithTiling(*tiling))

	var rows []evalRow
	enc := json.NewEncoder(os.Stdout)
	for _, in := range inputs {
		for _, eb := range bounds {
			p := in.p
			p.Bound = eb
			row, err := evalOne(ctx, in.name, in.data, p, in.suspect, opts, *repeat)
			if err != nil {
				return err
			}
			row.Backend = bname
			if *asJSON {
				if err := enc.Encode(jsonSafe(row)); err != nil {
					return err
				}
			}
			rows = append(rows, row)
		}
	}
	if !*asJSON {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "file\tmode\teb\tratio\tbits/value\tPSNR dB\tmax abs err\tmax err/eb\tcompress GB/s\tdecompress GB/s\tbackend\t\n")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%g\t%.3f\t%.3f\t%.2f\t%.4g\t%.4f\t%.3f\t%.3f\t%s\t\n", filepath.Base(r.File), r.Mode, r.EB, r.Ratio,
				r.BitsPerValue, r.PSNR, r.MaxAbsErr, r.MaxErrOverEB, r.CompressGBps, r.DecompressGBps, r.Backend)
		}
		tw.Flush()
	}
	var bad uint64
	for _, r := range rows {
		bad += r.Violations
		if r.MaxErrOverEBWithoutFill != nil {
			fmt.Fprintf(os.Stderr, "warning: %s at %s bound %g: max err/eb over the other values (leaving %.7g out) = %.4g (max err %.4g), against %.4g over all values\n",
				r.File, r.Mode, r.EB, *r.SuspectFill, *r.MaxErrOverEBWithoutFill, *r.MaxAbsErrWithoutFill, r.MaxErrOverEB)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d values violate the error bound", bad)
	}
	return nil
}

func evalOne(ctx context.Context, name string, data []byte, p fz.Params, suspect *fz.SuspectFill, opts []fz.Option, repeat int) (evalRow, error) {
	var blob []byte
	var st fz.Stats
	ct := make([]float64, repeat)
	for i := range ct {
		t0 := time.Now()
		var err error
		blob, st, err = fz.Compress(ctx, data, p, opts...)
		if err != nil {
			return evalRow{}, fmt.Errorf("%s at eb %g: %w", name, p.Bound, err)
		}
		ct[i] = time.Since(t0).Seconds()
	}
	dst := make([]byte, len(data))
	dt := make([]float64, repeat)
	var h *fz.Header
	for i := range dt {
		t0 := time.Now()
		var err error
		if h, err = fz.DecompressTo(ctx, blob, dst, opts...); err != nil {
			return evalRow{}, fmt.Errorf("%s at eb %g: decompress: %w", name, p.Bound, err)
		}
		dt[i] = time.Since(t0).Seconds()
	}
	q, err := fz.Verify(h, data, dst)
	if err != nil {
		return evalRow{}, err
	}
	n := float64(h.Elements())
	r := evalRow{
		File: name, Mode: p.Mode.String(), EB: p.Bound, AbsEB: st.AbsEB, Ratio: st.Ratio(), FormatVersion: h.Version, Tiling: tilingName(h),
		PSNR: q.PSNR, MaxAbsErr: q.MaxAbsErr, Violations: q.Violations,
		CompressGBps: float64(len(data)) / median(ct) / 1e9, DecompressGBps: float64(len(data)) / median(dt) / 1e9,
	}
	if n > 0 {
		r.BitsPerValue = float64(len(blob)) * 8 / n
	}
	if st.AbsEB > 0 {
		r.MaxErrOverEB = q.MaxAbsErr / st.AbsEB
	}
	warnExpansion(os.Stderr, name, data, p, st)
	if suspect != nil {
		m, err := fz.MeasureWithout(h, data, dst, suspect.Value)
		if err != nil {
			return evalRow{}, err
		}
		v, share, ratio := suspect.Value, suspect.Share, 0.0
		if m.MaxAbsErr > 0 {
			ratio = m.MaxAbsErr / m.AbsEB // +Inf when the others are constant
		}
		r.SuspectFill, r.SuspectFillShare, r.MaxAbsErrWithoutFill, r.MaxErrOverEBWithoutFill = &v, &share, &m.MaxAbsErr, &ratio
	}
	return r, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// jsonSafe replaces ±Inf and NaN (a lossless PSNR) which JSON cannot hold.
func jsonSafe(r evalRow) evalRow {
	if r.MaxErrOverEBWithoutFill != nil {
		f := *r.MaxErrOverEBWithoutFill
		r.MaxErrOverEBWithoutFill = &f
	}
	for _, f := range []*float64{&r.PSNR, &r.MaxErrOverEB, &r.Ratio, r.MaxErrOverEBWithoutFill} {
		if f == nil {
			continue
		}
		if math.IsInf(*f, 0) || math.IsNaN(*f) {
			*f = 999
		}
	}
	return r
}

// tilingName is the tiling a container has: flat, padded or boxes.
func tilingName(h *fz.Header) string {
	switch {
	case h.Flat:
		return "flat"
	case h.Padded:
		return "padded"
	}
	return "boxes"
}
