package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/simulate"
)

func init() {
	register(&command{name: "simulate", summary: "a synthetic simulation: publish smooth, time-evolving fields to the sidecar", run: runSimulate})
}

func runSimulate(ctx context.Context, args []string) error {
	fs := newFlags("simulate", "simulate [--nats-url URL] --run R [--vars a,b] [--steps N] [--dims D] [--interval T] [--dtype f32|f64] [--mode rel] [--eb 1e-3]")
	var pf producerFlags
	pf.register(fs)
	run := fs.String("run", "", "run name (required)")
	vars := fs.String("vars", "temp,pres", "comma-separated variable names")
	steps := fs.Int("steps", 10, "number of time steps")
	first := fs.Uint64("start-step", 0, "number of the first step")
	dimsStr := fs.String("dims", "64x128x128", "dimensions of every field, slowest to fastest")
	interval := fs.Duration("interval", 500*time.Millisecond, "simulated compute time between steps (0: as fast as possible)")
	dtypeStr := fs.String("dtype", "f32", "element type: f32 or f64")
	modeStr := fs.String("mode", "rel", "error-bound mode: abs or rel")
	eb := fs.Float64("eb", 1e-3, "error bound")
	timeout := fs.Duration("timeout", 10*time.Minute, "longest wait for the last results after the final step")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected argument %q", pos[0])
	}
	if *run == "" {
		return usageErr(fs, "missing --run")
	}
	names := strings.Split(*vars, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
		if names[i] == "" {
			return usageErr(fs, "--vars %q: expected names separated by commas, e.g. temp,pres", *vars)
		}
	}
	if *steps <= 0 {
		return usageErr(fs, "--steps %d: expected a positive count", *steps)
	}
	if *interval < 0 {
		return usageErr(fs, "--interval %v: expected a duration >= 0", *interval)
	}
	dims, err := fz.ParseDims(*dimsStr)
	if err != nil {
		return usageErr(fs, "--dims: %v", err)
	}
	dt, err := fz.ParseDType(*dtypeStr)
	if err != nil {
		return usageErr(fs, "--dtype: %v", err)
	}
	mode, err := fz.ParseMode(*modeStr)
	if err != nil {
		return usageErr(fs, "--mode: %v", err)
	}
	if !(*eb > 0) || math.IsInf(*eb, 0) {
		return usageErr(fs, "--eb %v: expected a positive number", *eb)
	}
	prod, nc, err := pf.open(ctx, fs, "fzsidecar simulate")
	if err != nil {
		return err
	}
	defer nc.Close()
	defer prod.Close()

	var (
		ok, failed, skipped int
		raw, comp           uint64
		firstErr            error
	)
	start := time.Now()
	// Results that stop coming get a progress line (stalled), as in publish.
	var mu sync.Mutex
	outstanding, lastNews := 0, time.Now()
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		next := resultProgress.first
		for {
			select {
			case <-stopWatch:
				return
			case <-t.C:
			}
			mu.Lock()
			n, quiet := outstanding, time.Since(lastNews)
			mu.Unlock()
			if n == 0 || quiet < next {
				if quiet < resultProgress.first {
					next = resultProgress.first
				}
				continue
			}
			fmt.Fprintf(os.Stderr, "fzsidecar simulate: waiting for %d results (none for %s; %s)...\n", n, roundSec(quiet), sidecarState(ctx, prod))
			next = quiet + resultProgress.every
		}
	}()
	opts := simulate.Options{Run: *run, Vars: names, Steps: *steps, FirstStep: *first, Dims: dims, DType: dt,
		Mode: mode, Bound: *eb, Interval: *interval, Timeout: *timeout + time.Duration(*steps)*(*interval),
		Published: func(ingest.Spec) {
			mu.Lock()
			if outstanding == 0 {
				lastNews = time.Now() // the wait starts now, not at the last result
			}
			outstanding++
			mu.Unlock()
		}}
	err = simulate.Run(ctx, prod, opts, func(e simulate.Event) {
		if !e.Skipped {
			mu.Lock()
			outstanding--
			lastNews = time.Now()
			mu.Unlock()
		}
		switch {
		case e.Skipped:
			skipped++
			fmt.Printf("skipped %s/%s step %d: %v\n", e.Spec.Run, e.Spec.Var, e.Spec.Step, e.Err)
		case e.Err == nil:
			ok++
			raw += e.Result.RawBytes
			comp += e.Result.CompressedBytes
			fmt.Printf("%-24s ratio %7.2f  max err %.3g  (%s)\n", e.Result.Key, float64(e.Result.Ratio), float64(e.Result.MaxAbsErr), humanBytes(e.Result.CompressedBytes))
		default:
			failed++
			if firstErr == nil {
				firstErr = e.Err
			}
			fmt.Printf("FAILED %v\n", e.Err)
		}
	})
	if err != nil {
		return err
	}
	el := time.Since(start)
	ratio := 0.0
	if comp > 0 {
		ratio = float64(raw) / float64(comp)
	}
	fmt.Printf("\n%d stored, %d failed, %d skipped (budget full) in %.1fs; %s -> %s, ratio %.2f, %.1f MB/s raw\n",
		ok, failed, skipped, el.Seconds(), humanBytes(raw), humanBytes(comp), ratio, float64(raw)/el.Seconds()/1e6)
	if failed > 0 {
		return fmt.Errorf("%d of %s snapshots failed; first: %w", failed, strconv.Itoa(ok+failed), firstErr)
	}
	return nil
}
