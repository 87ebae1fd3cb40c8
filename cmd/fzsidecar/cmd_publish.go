package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
)

func init() {
	register(&command{name: "publish", summary: "hand one raw file to the sidecar through shared memory and print the result", run: runPublish})
}

func runPublish(ctx context.Context, args []string) error {
	fs := newFlags("publish", "publish [--nats-url URL] --run R --var V --step N --dtype f32|f64 --dims D [--mode rel] --eb 1e-3 [--fill V] [--connect-timeout 30s] FILE")
	var pf producerFlags
	pf.register(fs)
	var ff fieldFlags
	ff.register(fs)
	run := fs.String("run", "", "run name (required)")
	variable := fs.String("var", "", "variable name (required)")
	step := fs.String("step", "", "step number (required)")
	eb := fs.String("eb", "", "error bound (required), absolute or relative per --mode")
	timeout := fs.Duration("timeout", 10*time.Minute, "longest wait for the result")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usageErr(fs, "missing FILE (raw little-endian elements)")
	case len(pos) > 1:
		return usageErr(fs, "one FILE at a time (got %d)", len(pos))
	case *run == "":
		return usageErr(fs, "missing --run")
	case *variable == "":
		return usageErr(fs, "missing --var")
	case *step == "":
		return usageErr(fs, "missing --step")
	}
	n, err := strconv.ParseUint(*step, 10, 64)
	if err != nil {
		return usageErr(fs, "--step %q: expected a non-negative integer", *step)
	}
	bound, err := strconv.ParseFloat(*eb, 64)
	if *eb == "" || err != nil || !(bound > 0) || math.IsInf(bound, 0) {
		return usageErr(fs, "--eb %q: expected a positive number such as 1e-3", *eb)
	}
	p, err := ff.params(fs, bound)
	if err != nil {
		return err
	}
	if err := positiveDuration(fs, "timeout", *timeout); err != nil {
		return err
	}
	if _, err := pf.check(fs); err != nil {
		return err
	}
	// Check the file before waiting for a sidecar: a typo should not cost
	// a connection timeout.
	fi, err := os.Stat(pos[0])
	if err != nil {
		return fmt.Errorf("input file: %w", err)
	}
	if fi.IsDir() {
		return argErr(fs, "%s is a directory: publish takes one raw file of little-endian elements (run it once per file)", pos[0])
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: publish takes one raw file of little-endian elements", pos[0])
	}
	if err := p.Validate(fi.Size()); err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	// As compress and eval do (and --fill's help promises): a value that
	// looks like an undeclared fill gets a warning before it is sent.
	if in, err := openInput(pos[0]); err == nil {
		warnSuspectFill(os.Stderr, pos[0], in.data, p)
		in.Close()
	}
	prod, nc, err := pf.open(ctx, fs, "fzsidecar publish")
	if err != nil {
		return err
	}
	defer nc.Close()
	defer prod.Close()

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	spec := ingest.Spec{Run: *run, Var: *variable, Step: n, DType: p.DType, Dims: p.Dims, Mode: p.Mode, Bound: p.Bound, Fill: p.Fill}
	pd, err := prod.PublishFile(ctx, pos[0], spec)
	if err != nil {
		return err
	}
	res, err := waitResult(ctx, prod, pd, fmt.Sprintf("%s/%s step %d", *run, *variable, n))
	if res != nil && *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Println(string(b))
	} else if res != nil && res.OK {
		fmt.Printf("stored %s\n  %s -> %s (ratio %.2f), max error %.4g (bound %.4g), %.2fs\n", res.Key,
			humanBytes(res.RawBytes), humanBytes(res.CompressedBytes), float64(res.Ratio), float64(res.MaxAbsErr), float64(res.AbsEB), res.Seconds)
	}
	if err != nil {
		if res != nil {
			fmt.Fprintf(os.Stderr, "fzsidecar publish: the sidecar refused %s/%s step %d\n", *run, *variable, n)
		}
		return err
	}
	return nil
}

// resultProgress is when publish first says it is still waiting for the
// result, then how often.
var resultProgress = struct{ first, every time.Duration }{5 * time.Second, 10 * time.Second}

// waitResult waits for pd's result and, while it takes long, says so with
// what the sidecar reports, or that it does not answer (it may be
// restarting: the snapshot stays queued in the stream meanwhile).
func waitResult(ctx context.Context, prod *ingest.Producer, pd *ingest.Pending, what string) (*ingest.Result, error) {
	type outcome struct {
		res *ingest.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := pd.Wait(ctx)
		done <- outcome{res, err}
	}()
	start := time.Now()
	tick := time.NewTimer(resultProgress.first)
	defer tick.Stop()
	for {
		select {
		case o := <-done:
			return o.res, o.err
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "fzsidecar publish: waiting for the result of %s (%s; %s)...\n", what, roundSec(time.Since(start)), sidecarState(ctx, prod))
			tick.Reset(resultProgress.every)
		}
	}
}

// sidecarState says what the sidecar reports about its load, or that it
// does not answer, for progress lines while results are awaited.
func sidecarState(ctx context.Context, prod *ingest.Producer) string {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := prod.Status(sctx)
	if err != nil {
		return fmt.Sprintf("the sidecar does not answer (%v): published snapshots stay queued and are handled when it is back", err)
	}
	return fmt.Sprintf("the sidecar is working on %d snapshots, %s of its %s budget in use",
		st.InFlight, humanBytes(uint64(max(st.UsedBytes, 0))), humanBytes(uint64(max(st.BudgetBytes, 0))))
}
