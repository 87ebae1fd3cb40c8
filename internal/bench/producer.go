package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/synth"
)

// ProducerOptions configure one producer process of the benchmark.
type ProducerOptions struct {
	URL, ShmDir, ID string
	Index           int // selects the field, so producers' data differ
	Snapshots       int
	Bytes           int64
	Reuse           int // segments kept for reuse (ingest.ProducerOptions.ReuseSegments)
	// NoFill publishes the measured snapshots without writing them: a
	// reused segment still holds the warm-up's field. It measures what the
	// sidecar can take when the producers' own memcpy is not the limit
	// (on hosts where K memcpys saturate memory bandwidth).
	NoFill bool
}

// readyLine is what a producer prints once it is warmed up; it then waits
// for a line on stdin before the measured snapshots.
type readyLine struct {
	Ready string `json:"ready"`
}

// ProducerReport is what a producer prints (one JSON line) for the
// orchestrator. Times are Unix nanoseconds: all processes share a clock.
type ProducerReport struct {
	ID           string `json:"id"`
	FirstPublish int64  `json:"first_publish_ns"`
	LastResult   int64  `json:"last_result_ns"`
	Raw          uint64 `json:"raw_bytes"`
	Comp         uint64 `json:"compressed_bytes"`
	// FillNs is the time spent writing snapshots into segments (the
	// producer's memcpy), BeginNs waiting in Begin (admission, segment).
	FillNs  int64  `json:"fill_ns"`
	Filled  int    `json:"filled"` // snapshots written (all of them unless NoFill)
	BeginNs int64  `json:"begin_ns"`
	OK      int    `json:"ok"`
	Failed  int    `json:"failed"`
	Err     string `json:"error,omitempty"`
}

// Dims is the field shape used for a snapshot of n bytes of f32.
func Dims(n int64) []uint64 {
	e := uint64(n / 4)
	if e%(256*256) == 0 {
		return []uint64{e / (256 * 256), 256, 256}
	}
	return []uint64{e}
}

// RunProducer first warms up — publishes max(Reuse, 1) snapshots (run
// "bench-warmup") and waits for their results, so its reused segments exist,
// are faulted in and the sidecar has seen them — then prints a ready line
// to out, waits for a line on in, and publishes Snapshots snapshots as fast
// as the sidecar admits them (block policy). Its report (one JSON line on
// out) covers only those. The field is generated once and copied into each
// segment, so the producer costs one memcpy per snapshot — about what a
// simulation pays to write its output — and the sidecar, not the
// generator, is what gets measured.
func RunProducer(ctx context.Context, o ProducerOptions, in io.Reader, out io.Writer) error {
	rep := ProducerReport{ID: o.ID}
	enc := json.NewEncoder(out)
	defer func() { _ = enc.Encode(&rep) }()
	fail := func(err error) error { rep.Err = err.Error(); return err }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(cctx, ingest.ConnOptions{URL: o.URL, Name: "bench producer " + o.ID, ShmDir: o.ShmDir, Log: log})
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	prod, err := ingest.NewProducer(cctx, nc, ingest.ProducerOptions{ID: o.ID, ShmDir: o.ShmDir, Policy: ingest.Block,
		BlockTimeout: 10 * time.Minute, ReuseSegments: o.Reuse, Log: log})
	if err != nil {
		return fail(err)
	}
	defer prod.Close()
	dims := Dims(o.Bytes)
	src := make([]byte, o.Bytes)
	synth.Fill32(fz.ViewFloats[float32](src), dims, o.Index, 0)

	if err := warmUp(ctx, prod, max(o.Reuse, 1), dims, src, o.ID); err != nil {
		return fail(fmt.Errorf("warm-up: %w", err))
	}
	if err := enc.Encode(readyLine{Ready: o.ID}); err != nil {
		return fail(err)
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fail(fmt.Errorf("waiting for the start signal on stdin: %w", err))
	}
	if err := publishAll(ctx, prod, "bench", o.Snapshots, dims, src, o.ID, o.Reuse, o.NoFill, &rep); err != nil {
		return fail(err)
	}
	return nil
}

// warmUp begins n snapshots before publishing any, so the producer ends up
// with n distinct segments — all it will use — written, faulted in and seen
// by the sidecar (registered, for a GPU). Published one after another, a
// fast result would hand the first segment back before the next Begin and
// the run itself would create, fill and register the missing ones (seen:
// one per producer, ~5 % of a GPU run's window).
func warmUp(ctx context.Context, prod *ingest.Producer, n int, dims []uint64, src []byte, id string) error {
	snaps := make([]*ingest.Snapshot, 0, n)
	for i := range n {
		snap, err := prod.Begin(ctx, ingest.Spec{Run: "bench-warmup", Var: id, Step: uint64(i), DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3})
		if err != nil {
			for _, s := range snaps {
				s.Abort()
			}
			return fmt.Errorf("snapshot %d: %w", i, err)
		}
		copy(snap.Bytes(), src)
		snaps = append(snaps, snap)
	}
	pds := make([]*ingest.Pending, 0, n)
	var first error
	for i, snap := range snaps {
		if first != nil {
			snap.Abort()
			continue
		}
		pd, err := snap.Publish(ctx)
		if err != nil {
			first = fmt.Errorf("snapshot %d: %w", i, err)
			continue
		}
		pds = append(pds, pd)
	}
	for i, pd := range pds {
		if _, err := pd.Wait(ctx); err != nil && first == nil {
			first = fmt.Errorf("snapshot %d: %w", i, err)
		}
	}
	return first
}

// publishAll publishes n snapshots of src under run and waits for every
// result, counting them in rep. With reuse > 0 at most reuse snapshots are
// in flight, like a simulation with that many output buffers: Begin then
// always finds a spare segment. noFill skips writing a reused segment (it
// already holds src); a new one is always written.
func publishAll(ctx context.Context, prod *ingest.Producer, run string, n int, dims []uint64, src []byte, id string, reuse int, noFill bool, rep *ProducerReport) error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	limit := n
	if reuse > 0 {
		limit = reuse
	}
	slots := make(chan struct{}, limit)
	for i := range n {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return context.Cause(ctx)
		}
		spec := ingest.Spec{Run: run, Var: id, Step: uint64(i), DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3}
		t0 := time.Now()
		snap, err := prod.Begin(ctx, spec)
		if err != nil {
			wg.Wait()
			return fmt.Errorf("snapshot %d: %w", i, err)
		}
		t1 := time.Now()
		if !noFill || !snap.Reused() {
			copy(snap.Bytes(), src)
			rep.Filled++
		}
		rep.BeginNs += int64(t1.Sub(t0))
		rep.FillNs += int64(time.Since(t1))
		if i == 0 {
			rep.FirstPublish = time.Now().UnixNano()
		}
		pd, err := snap.Publish(ctx)
		if err != nil {
			wg.Wait()
			return fmt.Errorf("snapshot %d: %w", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := pd.Wait(ctx)
			<-slots
			now := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Failed++
				errs = append(errs, err)
				return
			}
			rep.OK++
			rep.Raw += res.RawBytes
			rep.Comp += res.CompressedBytes
			rep.LastResult = max(rep.LastResult, now)
		}()
	}
	wg.Wait()
	if rep.Failed > 0 {
		return fmt.Errorf("%d snapshots failed: %w", rep.Failed, errors.Join(errs...))
	}
	return nil
}
