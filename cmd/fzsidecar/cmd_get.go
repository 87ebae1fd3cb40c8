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
	fs := newFlags("get", "get --sink URL --run R --var V --step N|latest [--backend auto|cpu|gpu] [--compressed] -o OUT")
	var k keyFlags
	k.register(fs, true, true)
	backend := fs.String("backend", "auto", "decoder: auto, cpu or gpu")
	out := fs.String("o", "", "output file for the raw little-endian values (C order); - for stdout")
	compressed := fs.Bool("compressed", false, "write the verified .fz container instead of decoding it")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := k.require(fs, "sink", "run", "var", "step"); err != nil {
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
	s, err := openSink(ctx, k.sink)
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
	if *compressed {
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
