package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
)

// depthObserver records the largest depth seen per stage and outcomes.
type depthObserver struct {
	mu    sync.Mutex
	depth map[pipeline.Stage]int
	peak  map[pipeline.Stage]int
	done  map[pipeline.Outcome]int
}

func newDepthObserver() *depthObserver {
	return &depthObserver{depth: map[pipeline.Stage]int{}, peak: map[pipeline.Stage]int{}, done: map[pipeline.Outcome]int{}}
}

func (o *depthObserver) Stage(pipeline.Stage, time.Duration) {}
func (o *depthObserver) Depth(s pipeline.Stage, d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.depth[s] += d
	o.peak[s] = max(o.peak[s], o.depth[s])
}
func (o *depthObserver) Done(out pipeline.Outcome, _ string, _ fz.Stats) {
	o.mu.Lock()
	o.done[out]++
	o.mu.Unlock()
}
func (o *depthObserver) get(m map[pipeline.Stage]int, s pipeline.Stage) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return m[s]
}

// consumerState reports notifications not yet handed to the sidecar and
// those handed out but not acked.
func consumerState(t *testing.T, url string) (pending uint64, ackPending int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, js := connectJS(t, ctx, url)
	defer nc.Close()
	var sub ingest.Subjects
	c, err := js.Consumer(ctx, sub.SnapshotStream(), sub.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	ci := c.CachedInfo()
	return ci.NumPending, ci.NumAckPending
}

// A stalled sink must stall everything behind it: writers and the store
// queue fill up, compressors stop, the receiver stops fetching, and the
// rest of the notifications wait in JetStream, not in sidecar memory. No
// result is published before its Put returns; once the sink moves again,
// everything is stored, each key once.
func TestSlowSinkBackpressure(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	store := &dirStore{dir: e.StoreDir, gate: gate}
	obs := newDepthObserver()
	const writers, queue, compressors = 2, 1, 1
	url := runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Store = store
		c.Pipeline.Writers, c.Pipeline.Queue, c.Pipeline.Compressors = writers, queue, compressors
		c.Pipeline.Observer = obs
	})
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 16
	done := make(chan []*sent, 1)
	go func() { done <- publishMany(ctx, p, n, 0, nil) }()

	// Wait until the pipeline is full: both writers blocked in Put.
	deadline := time.Now().Add(30 * time.Second)
	for store.cur.Load() < writers {
		if time.Now().After(deadline) {
			t.Fatalf("only %d puts started", store.cur.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Wait until every notification is in JetStream (taken by the sidecar
	// or waiting there): on a loaded machine the producers may still be
	// publishing when the writers block, and the check below counts the
	// waiting ones.
	deadline = time.Now().Add(30 * time.Second)
	for {
		waiting, taken := consumerState(t, url)
		if waiting+uint64(taken) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d notifications published (%d taken, %d waiting)", waiting+uint64(taken), n, taken, waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let anything that could overflow do so
	created, _ := readJournal(e.StoreDir)
	if len(created) != 0 {
		t.Fatalf("%d objects stored through a closed gate", len(created))
	}
	obs.mu.Lock()
	stored := obs.done[pipeline.Stored]
	obs.mu.Unlock()
	if stored != 0 {
		t.Fatalf("%d snapshots reported stored before any Put returned", stored)
	}
	// At most writers in Put, queue+compressors waiting for a writer (the
	// compressor holds one while blocked on the queue), none compressing.
	if s := obs.get(obs.peak, pipeline.StageStore); s > writers {
		t.Errorf("%d puts at once, want ≤ %d", s, writers)
	}
	if q := obs.get(obs.depth, pipeline.StageQueue); q > queue+compressors {
		t.Errorf("%d compressed snapshots queued, want ≤ %d", q, queue+compressors)
	}
	waiting, taken := consumerState(t, url)
	t.Logf("stalled: %d in Put, %d queued, %d taken by the sidecar, %d waiting in JetStream", store.cur.Load(), obs.get(obs.depth, pipeline.StageQueue), taken, waiting)
	if hold := writers + queue + compressors + 1; taken > hold || waiting < n-uint64(hold) {
		t.Errorf("%d notifications taken, %d waiting: the sidecar must take at most %d (what its stages hold)", taken, waiting, hold)
	}
	close(gate)
	all := <-done
	verify(t, e, all)
	if pk := store.peak.Load(); pk > writers || pk < 2 {
		t.Errorf("peak concurrent puts %d: want 2..%d (writes must run concurrently and bounded)", pk, writers)
	}
}

// Two notifications for the same key are stored in stream order even with
// several compressors: the first wins, the second (other bytes) is told
// conflict — as a sequential sidecar would do.
func TestSameKeyKeepsStreamOrder(t *testing.T) {
	e := newEnv(t)
	url := runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Compressors, c.Pipeline.Writers = 4, 4
	})
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for round := range 5 {
		spec := ingest.Spec{Run: "order", Var: "v", Step: uint64(round), DType: fz.Float32, Dims: []uint64{64, 64, 64}, Mode: fz.Abs, Bound: 1e-3}
		var pds []*ingest.Pending
		for seed := range 3 {
			s, pd := publishOne(ctx, p, spec, seed+round)
			if s.err != nil {
				t.Fatal(s.err)
			}
			pds = append(pds, pd)
		}
		for i, pd := range pds {
			res, err := pd.Wait(ctx)
			switch {
			case i == 0 && err != nil:
				t.Fatalf("round %d: first publish: %v", round, err)
			case i > 0 && !errors.Is(err, ingest.ErrConflict):
				t.Fatalf("round %d: publish %d of the same key: got %v %+v, want conflict", round, i, err, res)
			}
		}
	}
}

// The device seam: a DirectCodec reads the mapping itself (here through a
// CopyTo into a staging buffer, as the GPU's pinned-ring fallback does) and
// the stored bytes are exactly what the copy path's codec produces.
func TestDirectCodecSameBytes(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	url := runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Codec = nil
		c.Pipeline.Direct = func(ctx context.Context, m *ingest.Mapping, p fz.Params) ([]byte, fz.Stats, error) {
			calls.Add(1)
			defer m.Close()
			stage := make([]byte, m.Len())
			if err := m.CopyTo(stage); err != nil {
				return nil, fz.Stats{}, err
			}
			return fz.Compress(ctx, stage, p, fz.WithWorkers(1))
		}
	})
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := publishMany(ctx, p, 8, 0, nil)
	verify(t, e, all)
	if calls.Load() != 8 {
		t.Fatalf("direct codec called %d times for 8 snapshots", calls.Load())
	}
	for _, s := range all {
		k := pipeline.Key{Run: s.spec.Run, Var: s.spec.Var, Step: s.spec.Step}
		got, err := os.ReadFile(filepath.Join(e.StoreDir, filepath.FromSlash(k.String())))
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := fz.Compress(ctx, s.raw, fz.Params{DType: s.spec.DType, Dims: s.spec.Dims, Mode: s.spec.Mode, Bound: s.spec.Bound})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: direct path stored %d bytes that differ from the copy path's %d", k, len(got), len(want))
		}
	}
}
