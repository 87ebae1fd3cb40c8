package bench

import (
	"context"
	"encoding/json"
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
}

// ProducerReport is what a producer prints (one JSON line) for the
// orchestrator. Times are Unix nanoseconds: all processes share a clock.
type ProducerReport struct {
	ID           string `json:"id"`
	FirstPublish int64  `json:"first_publish_ns"`
	LastResult   int64  `json:"last_result_ns"`
	Raw          uint64 `json:"raw_bytes"`
	Comp         uint64 `json:"compressed_bytes"`
	OK           int    `json:"ok"`
	Failed       int    `json:"failed"`
	Err          string `json:"error,omitempty"`
}

// Dims is the field shape used for a snapshot of n bytes of f32.
func Dims(n int64) []uint64 {
	e := uint64(n / 4)
	if e%(256*256) == 0 {
		return []uint64{e / (256 * 256), 256, 256}
	}
	return []uint64{e}
}

// RunProducer publishes Snapshots snapshots as fast as the sidecar admits
// them (block policy) and writes its report to out. The field is generated
// once and copied into each segment, so the producer costs one memcpy per
// snapshot — about what a simulation pays to write its output — and the
// sidecar, not the generator, is what gets measured.
func RunProducer(ctx context.Context, o ProducerOptions, out io.Writer) error {
	rep := ProducerReport{ID: o.ID}
	defer func() { _ = json.NewEncoder(out).Encode(&rep) }()
	fail := func(err error) error { rep.Err = err.Error(); return err }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(cctx, ingest.ConnOptions{URL: o.URL, Name: "bench producer " + o.ID, Log: log})
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

	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range o.Snapshots {
		spec := ingest.Spec{Run: "bench", Var: o.ID, Step: uint64(i), DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3}
		snap, err := prod.Begin(ctx, spec)
		if err != nil {
			wg.Wait()
			return fail(fmt.Errorf("snapshot %d: %w", i, err))
		}
		copy(snap.Bytes(), src)
		if i == 0 {
			rep.FirstPublish = time.Now().UnixNano()
		}
		pd, err := snap.Publish(ctx)
		if err != nil {
			wg.Wait()
			return fail(fmt.Errorf("snapshot %d: %w", i, err))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := pd.Wait(ctx)
			now := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Failed++
				if rep.Err == "" {
					rep.Err = err.Error()
				}
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
		return fmt.Errorf("%d snapshots failed: %s", rep.Failed, rep.Err)
	}
	return nil
}
