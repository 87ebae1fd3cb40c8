// Package simulate is a stand-in simulation: every interval it writes a
// smooth, time-evolving field per variable straight into shared memory
// (internal/synth) and publishes it to the sidecar, without waiting for
// earlier results (the sidecar's budget bounds what is in flight). The
// `simulate`, `demo` and `bench e2e` commands share it.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/synth"
)

// Options describe the simulated run.
type Options struct {
	Run       string
	Vars      []string
	Steps     int
	FirstStep uint64
	Dims      []uint64
	DType     fz.DType
	Mode      fz.Mode
	Bound     float64
	// Interval is the simulated compute time between steps (0: as fast as
	// possible).
	Interval time.Duration
	// Timeout bounds the wait for each result after its publish.
	Timeout time.Duration
	// Fill, if set, replaces the synthetic field (benchmarks use a cheaper
	// one so the producer is not the bottleneck); it gets the segment bytes.
	Fill func(b []byte, vi int, step uint64)
	// Published, if set, is called after each snapshot is in the stream
	// (with report, it tells how many results are outstanding).
	Published func(ingest.Spec)
}

// Event is one snapshot's fate: stored (Result), failed (Err), or skipped
// because the budget was full under the fail policy.
type Event struct {
	Spec      ingest.Spec
	VarIndex  int
	Result    *ingest.Result
	Err       error
	Skipped   bool
	Published time.Time
}

// Field regenerates what Run published for variable vi at step, for
// verification.
func Field(dims []uint64, dt fz.DType, vi int, step uint64) []byte {
	n, _ := fz.NumElements(dims)
	b := make([]byte, n*uint64(dt.Size()))
	fill(b, dims, dt, vi, step)
	return b
}

func fill(b []byte, dims []uint64, dt fz.DType, vi int, step uint64) {
	if dt == fz.Float32 {
		synth.Fill32(fz.ViewFloats[float32](b), dims, vi, step)
	} else {
		synth.Fill64(fz.ViewFloats[float64](b), dims, vi, step)
	}
}

// Run publishes Steps × Vars snapshots through prod and calls report (one
// call at a time) as each is resolved. It returns once every result is in,
// or early with the error that stopped publishing.
func Run(ctx context.Context, prod *ingest.Producer, o Options, report func(Event)) error {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	emit := func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		report(e)
	}
	defer wg.Wait()
	last := o.FirstStep + uint64(o.Steps)
	for s := o.FirstStep; s < last; s++ {
		stepStart := time.Now()
		for vi, name := range o.Vars {
			spec := ingest.Spec{Run: o.Run, Var: name, Step: s, DType: o.DType, Dims: o.Dims, Mode: o.Mode, Bound: o.Bound}
			snap, err := prod.Begin(ctx, spec)
			if errors.Is(err, ingest.ErrBudgetFull) {
				// What a simulation under the fail policy does: skip this
				// output and keep computing.
				emit(Event{Spec: spec, VarIndex: vi, Err: err, Skipped: true})
				continue
			}
			if err != nil {
				return fmt.Errorf("%s/%s step %d: %w", o.Run, name, s, err)
			}
			// The "simulation" writes straight into shared memory.
			if o.Fill != nil {
				o.Fill(snap.Bytes(), vi, s)
			} else {
				fill(snap.Bytes(), o.Dims, o.DType, vi, s)
			}
			published := time.Now()
			pd, err := snap.Publish(ctx)
			if err != nil {
				return fmt.Errorf("%s/%s step %d: %w", o.Run, name, s, err)
			}
			if o.Published != nil {
				o.Published(spec)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, o.Timeout)
				defer cancel()
				res, err := pd.Wait(wctx)
				emit(Event{Spec: spec, VarIndex: vi, Result: res, Err: err, Published: published})
			}()
		}
		if rest := o.Interval - time.Since(stepStart); rest > 0 && s+1 < last {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(rest):
			}
		}
	}
	return nil
}
