package main

import (
	"context"
	"fmt"
	"os"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/retrieve"
	"github.com/fzsidecar/fzsidecar/sinks"
)

func init() {
	register(&command{name: "get", summary: "fetch one snapshot from a sink, verify and decompress it", run: runGet})
}

func runGet(ctx context.Context, args []string) error {
	fs := newFlags("get", "get [--sink URL | --config FILE] --run R --var V --step N|latest [--region LO:HI] [--backend auto|cpu|gpu] [--compressed] -o OUT")
	var k keyFlags
	k.register(fs, true, true)
	backend := fs.String("backend", "auto", "decoder: auto, cpu or gpu")
	out := fs.String("o", "", "output file for the raw little-endian values (C order); - for stdout")
	compressed := fs.Bool("compressed", false, "write the verified .fz container instead of decoding it")
	region := fs.String("region", "", "decode only indices LO:HI (half-open) of the slowest dimension, fetching only the chunks that hold them")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := k.require(fs, "run", "var", "step"); err != nil {
		return err
	}
	if *out == "" {
		return usageErr(fs, "-o is required")
	}
	if len(pos) != 0 {
		return usageErr(fs, "unexpected arguments %q", pos)
	}
	decodeOpts, _, err := selectBackend(*backend)
	if err != nil {
		return usageErr(fs, "%v", err)
	}
	if _, _, err := sinks.ParseStep(k.step); err != nil {
		return usageErr(fs, "%v", err)
	}
	var reg *fz.Region
	if *region != "" {
		var lo, hi uint64
		if n, err := fmt.Sscanf(*region, "%d:%d", &lo, &hi); n != 2 || err != nil || lo >= hi {
			return usageErr(fs, "--region %q: expected LO:HI with LO < HI, e.g. 10:20", *region)
		}
		if *compressed {
			return usageErr(fs, "--region and --compressed do not go together")
		}
		reg = &fz.Region{Lo: lo, Hi: hi}
	}
	s, err := k.openSink(ctx, fs, true)
	if err != nil {
		return err
	}
	defer s.Close()
	step, err := resolveStep(ctx, s, k.run, k.v, k.step)
	if err != nil {
		return err
	}
	key := sinks.Key{Run: k.run, Var: k.v, Step: step}
	var data []byte
	var what string
	if reg != nil {
		h, raw, err := retrieve.FetchRegion(ctx, s, key, *reg)
		if err != nil {
			return err
		}
		d := append([]uint64{reg.Hi - reg.Lo}, h.Dims[1:]...)
		data, what = raw, fmt.Sprintf("%s %s, region %d:%d of %s", h.DType, fz.FormatDims(d), reg.Lo, reg.Hi, fz.FormatDims(h.Dims))
	} else if *compressed {
		blob, m, err := s.Get(ctx, key)
		if err != nil {
			return err
		}
		data, what = blob, fmt.Sprintf("container, crc32c %08x", m.CRC32C)
	} else {
		h, raw, _, err := retrieve.Fetch(ctx, s, key, decodeOpts...)
		if err != nil {
			return err
		}
		data, what = raw, fmt.Sprintf("%s %s", h.DType, fz.FormatDims(h.Dims))
	}
	if err := writeAtomic(*out, writeBytes(data)); err != nil {
		return err
	}
	if *out == "-" {
		return nil
	}
	fmt.Fprintf(os.Stderr, "wrote %s (%s, %s) to %s\n", key, what, humanBytes(uint64(len(data))), *out)
	return nil
}
