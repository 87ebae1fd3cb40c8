package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func newProducer(t *testing.T, url, shm string, mod func(*ingest.ProducerOptions)) *ingest.Producer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	o := ingest.ProducerOptions{ID: "prod-" + strings.ReplaceAll(t.Name(), "/", "_"), ShmDir: shm,
		BlockTimeout: 90 * time.Second, PollInterval: 500 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	p, err := ingest.NewProducer(ctx, nc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); nc.Close() })
	return p
}

// sent remembers what was published so the stored objects can be checked.
type sent struct {
	spec ingest.Spec
	raw  []byte
	res  *ingest.Result
	err  error
	// reused: the producer handed out a spare segment (Snapshot.Reused)
	reused bool
}

// publishOne does what a simulation does: admission, fill in place, then
// publish. It returns once published; wait collects the result.
func publishOne(ctx context.Context, p *ingest.Producer, spec ingest.Spec, seed int) (*sent, *ingest.Pending) {
	s := &sent{spec: spec}
	snap, err := p.Begin(ctx, spec)
	if err != nil {
		s.err = fmt.Errorf("begin: %w", err)
		return s, nil
	}
	s.reused = snap.Reused()
	if spec.DType == fz.Float32 {
		fillField(snap.Float32(), seed, int(spec.Step))
	} else {
		fillField64(snap.Float64(), seed, int(spec.Step))
	}
	s.raw = append([]byte(nil), snap.Bytes()...)
	pd, err := snap.Publish(ctx)
	if err != nil {
		s.err = fmt.Errorf("publish: %w", err)
		return s, nil
	}
	return s, pd
}

func specFor(i int) ingest.Spec {
	vars := []string{"temp", "pres", "vel_u", "rho"}
	v := vars[i%len(vars)]
	sp := ingest.Spec{Run: "run1", Var: v, Step: uint64(i / len(vars)), DType: fz.Float32,
		Dims: []uint64{32, 48, 40}, Mode: fz.Rel, Bound: 1e-3}
	if v == "rho" {
		sp.DType, sp.Dims, sp.Mode, sp.Bound = fz.Float64, []uint64{40, 1000}, fz.Abs, 1e-4
	}
	return sp
}

// publishMany runs one simulated rank per variable (4), each publishing
// n/4 steps back to back, pausing interval between steps and not waiting
// for results before the next step (the budget bounds what is in flight).
// started is called as each snapshot begins.
func publishMany(ctx context.Context, p *ingest.Producer, n int, interval time.Duration, started func(i int)) []*sent {
	out := make([]*sent, n)
	var wg sync.WaitGroup
	for rank := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := rank; i < n; i += 4 {
				if started != nil {
					started(i)
				}
				s, pd := publishOne(ctx, p, specFor(i), i%4)
				out[i] = s
				if pd != nil {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s.res, s.err = pd.Wait(ctx)
					}()
				}
				time.Sleep(interval)
			}
		}()
	}
	wg.Wait()
	return out
}

// verify checks every result and stored object, and that each key was
// created exactly once and nothing else was stored.
func verify(t *testing.T, e sidecarEnv, all []*sent) {
	t.Helper()
	created, same := readJournal(e.StoreDir)
	for i, s := range all {
		if s.err != nil {
			t.Errorf("snapshot %d (%s step %d): %v", i, s.spec.Var, s.spec.Step, s.err)
			continue
		}
		k := pipeline.Key{Run: s.spec.Run, Var: s.spec.Var, Step: s.spec.Step}
		if !s.res.OK || s.res.Key != k.String() || s.res.RawBytes != uint64(len(s.raw)) || s.res.CompressedBytes == 0 {
			t.Errorf("snapshot %d: result %+v", i, s.res)
			continue
		}
		blob, err := os.ReadFile(filepath.Join(e.StoreDir, filepath.FromSlash(k.String())))
		if err != nil {
			t.Errorf("snapshot %d not stored: %v", i, err)
			continue
		}
		if uint64(len(blob)) != s.res.CompressedBytes {
			t.Errorf("snapshot %d: stored %d bytes, result says %d", i, len(blob), s.res.CompressedBytes)
		}
		p := fz.Params{DType: s.spec.DType, Dims: s.spec.Dims, Mode: s.spec.Mode, Bound: s.spec.Bound}
		if err := decodeCheck(blob, s.raw, p); err != nil {
			t.Errorf("snapshot %d: %v", i, err)
		}
		if created[k.String()] != 1 {
			t.Errorf("snapshot %d: key %s created %d times", i, k, created[k.String()])
		}
	}
	if len(created) != len(all) {
		t.Errorf("%d objects created for %d snapshots", len(created), len(all))
	}
	var re int
	for _, n := range same {
		re += n
	}
	t.Logf("%d snapshots stored once each; %d idempotent re-puts after redelivery", len(created), re)
	// Every segment was removed once its result arrived.
	ents, _ := os.ReadDir(e.ShmDir)
	if len(ents) != 0 {
		t.Errorf("%d segments left in %s", len(ents), e.ShmDir)
	}
}

// queueEmpty checks that every notification was acked (work-queue stream).
func queueEmpty(t *testing.T, p *ingest.Producer, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, js := connectJS(t, ctx, url)
	defer nc.Close()
	var sub ingest.Subjects
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := js.Stream(ctx, sub.SnapshotStream())
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notifications still queued after all results", s.CachedInfo().State.Msgs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestSnapshotsAcrossProcesses(t *testing.T) {
	e := newEnv(t)
	c := startChild(t, &e, "sidecar.log")
	p := newProducer(t, c.url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	all := publishMany(ctx, p, 48, 0, nil)
	t.Logf("48 snapshots in %v", time.Since(start))
	verify(t, e, all)
	queueEmpty(t, p, c.url)
	c.stop(t) // SIGTERM: clean exit
}

func TestSidecarKilledMidStream(t *testing.T) {
	e := newEnv(t)
	e.StoreDelay = 40 * time.Millisecond // a slow sink keeps snapshots in flight
	c := startChild(t, &e, "sidecar1.log")
	p := newProducer(t, c.url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	const n = 60
	var down atomic.Bool
	var duringOutage, begun atomic.Int32
	done := make(chan []*sent, 1)
	go func() {
		done <- publishMany(ctx, p, n, 100*time.Millisecond, func(int) {
			begun.Add(1)
			if down.Load() {
				duringOutage.Add(1)
			}
		})
	}()
	// Kill once a good part of the stream is stored but not all of it.
	for {
		created, _ := readJournal(e.StoreDir)
		if len(created) >= 12 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no progress before the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	down.Store(true)
	c.kill()
	created, _ := readJournal(e.StoreDir)
	t.Logf("SIGKILL after %d snapshots begun, %d stored", begun.Load(), len(created))
	time.Sleep(2 * time.Second) // the producer keeps trying meanwhile
	down.Store(false)
	c = startChild(t, &e, "sidecar2.log")
	all := <-done
	if duringOutage.Load() == 0 {
		t.Error("no snapshot was started during the outage; the test did not exercise it")
	}
	t.Logf("%d snapshots started during the outage", duringOutage.Load())
	verify(t, e, all)
	queueEmpty(t, p, c.url)
	c.stop(t)
}

// connectJS connects a test client to the sidecar's NATS and JetStream.
func connectJS(t *testing.T, ctx context.Context, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return nc, js
}
