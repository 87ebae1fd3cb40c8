package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure GPU codec throughput against the GPU's memcpy",
		run:     runBench,
	})
}

func runBench(ctx context.Context, args []string) error {
	fs := newFlags("bench", "bench --backend gpu [--size 1GiB] [--reps 20] [--data DIR] [--rel 1e-2,1e-3,1e-4] [--fields P1,P2] [--json FILE] [--format-version 1|2] [--tiling boxes|flat|auto|padded] [--file RAW --dims AxBxC [--dtype f32] [--fill V]]")
	be := fs.String("backend", "gpu", "backend to measure (only gpu is supported)")
	size := fs.String("size", "1GiB", "bytes per field (real fields are tiled up to this)")
	reps := fs.Int("reps", 20, "timed runs per measurement; the median is reported")
	data := fs.String("data", "", "directory of the real fields (../shared/data); empty: generated field only")
	rels := fs.String("rel", "1e-2,1e-3,1e-4", "comma-separated relative error bounds")
	fields := fs.String("fields", "", "comma-separated name prefixes of the fields to measure (e.g. smooth3d,hyg); empty: all")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	version := formatVersionFlag(fs)
	tiling := tilingFlag(fs)
	file := fs.String("file", "", "measure this raw field file (row-major, little-endian; tiled up to --size like the real fields); alone it is the only field, with --fields the named ones are measured too")
	fdims := fs.String("dims", "", "--file's dims, slowest to fastest (e.g. 20x180x360)")
	fdtype := fs.String("dtype", "f32", "--file's dtype: f32 or f64")
	ffill := fs.String("fill", "", "--file's fill value (e.g. -1e10); empty: none")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected argument %q", pos[0])
	}
	if *be != "gpu" {
		return usageErr(fs, "--backend %q: bench measures the GPU backend only (--backend gpu)", *be)
	}
	sz, err := parseSize(*size)
	n := uint64(sz)
	if err != nil {
		return usageErr(fs, "--size: %v", err)
	}
	if *reps < 1 {
		return usageErr(fs, "--reps must be at least 1")
	}
	var rs []float64
	for _, s := range strings.Split(*rels, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v > 0) {
			return usageErr(fs, "--rel %q: expected positive numbers", s)
		}
		rs = append(rs, v)
	}
	var bf *cuda.BenchFile
	if *file != "" {
		bf = &cuda.BenchFile{Path: *file}
		if bf.Dims, err = fz.ParseDims(*fdims); err != nil {
			return usageErr(fs, "--dims (for --file): %v", err)
		}
		if bf.DType, err = fz.ParseDType(*fdtype); err != nil {
			return usageErr(fs, "--dtype: %v", err)
		}
		if *ffill != "" {
			v, err := strconv.ParseFloat(*ffill, 64)
			if err != nil {
				return usageErr(fs, "--fill %q: expected a number", *ffill)
			}
			bf.Fill = &v
		}
	} else if *fdims != "" || *ffill != "" {
		return usageErr(fs, "--dims and --fill describe --file: give --file too")
	}
	rep, err := cuda.RunBench(ctx, cuda.BenchConfig{Bytes: n, Reps: *reps, DataDir: *data, Rels: rs, Fields: splitList(*fields), Log: os.Stderr, FormatVersion: uint16(*version), Tiling: *tiling, File: bf})
	if err != nil {
		return fmt.Errorf("--backend gpu: %w", err)
	}
	fmt.Printf("device: %s\n", rep.Device)
	fmt.Printf("memcpy D2D %.1f GB/s (bytes copied)   pinned H2D %.1f GB/s   pinned D2H %.1f GB/s\n",
		rep.D2DBps/1e9, rep.H2DBps/1e9, rep.D2HBps/1e9)
	fmt.Printf("%-38s %-7s %8s %10s %7s %10s %7s\n", "field", "rel", "ratio", "comp GB/s", "×mcpy", "dec GB/s", "×mcpy")
	for _, c := range rep.Cases {
		fmt.Printf("%-38s %-7g %8.2f %10.1f %7.2f %10.1f %7.2f\n", c.Field, c.Rel, c.Ratio,
			c.CompressBps/1e9, c.CompressX, c.DecompressBps/1e9, c.DecompressX)
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *jsonOut, err)
		}
	}
	return nil
}

// splitList is a comma-separated flag value without empty items; nil for "".
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
