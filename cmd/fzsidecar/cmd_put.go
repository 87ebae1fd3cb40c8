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
	register(&command{name: "put", summary: "store an existing .fz container in a sink", run: runPut})
}

// maxPutFile bounds what put reads into memory.
const maxPutFile = sinks.DefaultMaxObjectBytes

func runPut(ctx context.Context, args []string) error {
	fs := newFlags("put", "put [--sink URL | --config FILE] --run R --var V --step N IN.fz")
	var k keyFlags
	k.register(fs, true, true)
	fs.Lookup("step").Usage = "step number"
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := k.require(fs, "run", "var", "step"); err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(fs, "expected one input container, got %d arguments", len(pos))
	}
	step, latest, err := sinks.ParseStep(k.step)
	if err != nil {
		return usageErr(fs, "%v", err)
	}
	if latest {
		return usageErr(fs, "--step latest makes no sense for put: give the step number")
	}
	key := sinks.Key{Run: k.run, Var: k.v, Step: step}
	if err := key.Validate(); err != nil {
		return usageErr(fs, "%v", err)
	}
	in := pos[0]
	fi, err := os.Stat(in)
	if err != nil {
		return fmt.Errorf("input container: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxPutFile {
		return fmt.Errorf("%s: expected a regular file of at most %d bytes", in, maxPutFile)
	}
	blob, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	h, err := fz.ReadHeader(blob)
	if err != nil {
		return fmt.Errorf("%s is not a valid container: %w", in, err)
	}
	if h.CompressedSize() != uint64(len(blob)) {
		return fmt.Errorf("%s is %d bytes but its chunk index says %d: truncated or padded", in, len(blob), h.CompressedSize())
	}
	s, err := k.openSink(ctx, fs, false)
	if err != nil {
		return err
	}
	defer s.Close()
	m := retrieve.MetaOf(h)
	if err := s.Put(ctx, key, blob, m); err != nil {
		return err
	}
	m.Stored = uint64(len(blob))
	fmt.Printf("stored %s in %s: %s, ratio %.2f, %s %s bound %g\n", key, s, humanBytes(m.Stored), m.Ratio(), m.DType, m.Mode, m.Bound)
	return nil
}
