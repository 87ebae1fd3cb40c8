package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fzsidecar/fzsidecar/internal/progress"
	"github.com/fzsidecar/fzsidecar/internal/retrieve"
	"github.com/fzsidecar/fzsidecar/sinks"
)

func init() {
	register(&command{name: "restore", summary: "fetch and decompress every variable of one step into a directory", run: runRestore})
}

func runRestore(ctx context.Context, args []string) error {
	fs := newFlags("restore", "restore [--sink URL | --config FILE] --run R --step N|latest --to DIR [--jobs N] [--backend auto|cpu|gpu]")
	var k keyFlags
	k.register(fs, false, true)
	to := fs.String("to", "", "directory for <var>.raw files and restore.json (e.g. under /dev/shm for a producer to map)")
	jobs := fs.Int("jobs", 4, "variables fetched and decoded at once")
	backend := fs.String("backend", "auto", "decoder: auto, cpu or gpu")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := k.require(fs, "run", "step"); err != nil {
		return err
	}
	if *to == "" {
		return usageErr(fs, "--to is required")
	}
	if len(pos) != 0 {
		return usageErr(fs, "unexpected arguments %q", pos)
	}
	if *jobs < 1 || *jobs > 256 {
		return usageErr(fs, "--jobs %d: expected 1 to 256", *jobs)
	}
	decodeOpts, _, err := selectBackend(*backend)
	if err != nil {
		return usageErr(fs, "%v", err)
	}
	if _, _, err := sinks.ParseStep(k.step); err != nil {
		return usageErr(fs, "%v", err)
	}
	s, err := k.openSink(ctx, fs, true)
	if err != nil {
		return err
	}
	defer s.Close()
	step, err := resolveStep(ctx, s, k.run, "", k.step)
	if err != nil {
		return err
	}
	es, err := sinks.StepEntries(ctx, s, k.run, step)
	if err != nil {
		return err
	}
	bar := progress.New(os.Stderr, fmt.Sprintf("restore %s step %d", k.run, step), retrieve.TotalRaw(es))
	abs, _ := filepath.Abs(*to)
	man, err := retrieve.Restore(ctx, s, k.run, step, *to, retrieve.RestoreOptions{
		Jobs: *jobs, Bar: bar, Decode: decodeOpts,
		// fsync means nothing on tmpfs and costs time on a restart.
		Sync: !strings.HasPrefix(abs, "/dev/shm/"),
	})
	bar.Done()
	if err != nil {
		return err
	}
	var total uint64
	for _, v := range man.Vars {
		total += v.Bytes
	}
	fmt.Fprintf(os.Stderr, "restored %d variables of %s step %d (%s) into %s\n", len(man.Vars), k.run, step, humanBytes(total), *to)
	return nil
}
