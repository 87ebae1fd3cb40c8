package pipeline_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/sidecar"
)

// SIGTERM mid-stream: the sidecar stops taking snapshots, finishes those
// already in its stages (they are stored and acked, never redone), exits 0;
// after a restart the rest are stored, each exactly once.
func TestSIGTERMDrains(t *testing.T) {
	e := newEnv(t)
	e.StoreDelay = 250 * time.Millisecond
	c := startChild(t, &e, "sidecar1.log")
	p := newProducer(t, c.url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	done := make(chan []*sent, 1)
	go func() { done <- publishMany(ctx, p, 24, 20*time.Millisecond, nil) }()
	for {
		created, _ := readJournal(e.StoreDir)
		if len(created) >= 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no progress")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	c.stop(t) // SIGTERM; fails the test unless the exit status is 0
	created, _ := readJournal(e.StoreDir)
	t.Logf("SIGTERM: exit after %v with %d stored", time.Since(t0).Round(time.Millisecond), len(created))
	log, _ := os.ReadFile(filepath.Join(e.DataDir, "sidecar1.log"))
	if strings.Contains(string(log), "drain timeout") {
		t.Errorf("in-flight snapshots were handed back instead of finished:\n%s", tail(string(log), 2000))
	}
	c = startChild(t, &e, "sidecar2.log")
	all := <-done
	verify(t, e, all)
	if _, same := readJournal(e.StoreDir); len(same) != 0 {
		t.Errorf("%d snapshots stored before SIGTERM were processed again after the restart: the drain did not ack them", len(same))
	}
	queueEmpty(t, p, c.url)
	c.stop(t)
}

// A sink that never returns cannot hold shutdown hostage: after the drain
// timeout what is in flight goes back to JetStream and Run returns.
func TestDrainTimeoutHandsBack(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{}) // never opened
	e.Listen = freeAddr(t)
	cfg := e.config()
	cfg.Pipeline.Store = &dirStore{dir: e.StoreDir, gate: gate}
	cfg.Pipeline.DrainTimeout = 300 * time.Millisecond
	cfg.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ready := make(chan string, 1)
	cfg.Ready = func(url string) { ready <- url }
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- sidecar.Run(sctx, cfg) }()
	var url string
	select {
	case url = <-ready:
	case err := <-ran: // e.g. its port taken meanwhile: fail, do not hang
		t.Fatalf("sidecar: %v", err)
	}
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var all []*sent
	var pds []*ingest.Pending
	for i := range 3 {
		s, pd := publishOne(ctx, p, specFor(i), i%4)
		if s.err != nil {
			t.Fatal(s.err)
		}
		all, pds = append(all, s), append(pds, pd)
	}
	time.Sleep(500 * time.Millisecond) // all three reach the stalled sink
	t0 := time.Now()
	stop()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("sidecar.Run did not return after the drain timeout")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("shutdown took %v with a 300ms drain timeout", d)
	}
	if created, _ := readJournal(e.StoreDir); len(created) != 0 {
		t.Errorf("%d stored through a closed gate", len(created))
	}
	// Handed back, not lost: a restarted sidecar stores all three.
	runInProcess(t, e, nil)
	for i, pd := range pds {
		all[i].res, all[i].err = pd.Wait(ctx)
	}
	verify(t, e, all)
}

// SIGTERM with snapshots stuck in a sink that never answers, one waiting
// at the dispatcher behind another of its key, and one just fetched by the
// receiver: after the drain timeout all are handed back for immediate
// redelivery, so a restarted sidecar stores them within seconds, not after
// the ack wait (30 s here, the default), and each exactly once.
func TestSIGTERMHandBackIsPickedUpAtOnce(t *testing.T) {
	e := newEnv(t)
	e.AckWait = 30 * time.Second
	e.DrainTimeout = 300 * time.Millisecond
	e.Hang = true
	c := startChild(t, &e, "sidecar1.log")
	p := newProducer(t, c.url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var all []*sent
	var pds []*ingest.Pending
	publish := func(spec ingest.Spec, seed int) {
		s, pd := publishOne(ctx, p, spec, seed)
		if s.err != nil {
			t.Fatal(s.err)
		}
		all, pds = append(all, s), append(pds, pd)
	}
	waitAckPending := func(n int) {
		for {
			if _, ack := consumerState(t, c.url); ack >= n {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("fewer than %d snapshots reached the sidecar", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The first hangs in the sink; the second (same key, same bytes) holds
	// the dispatcher at the key's lock; the third is fetched by the receiver
	// and waits for the dispatcher.
	publish(specFor(0), 0)
	waitAckPending(1)
	publish(specFor(0), 0)
	waitAckPending(2)
	publish(specFor(1), 1)
	waitAckPending(3)
	time.Sleep(300 * time.Millisecond)
	c.stop(t)
	if created, _ := readJournal(e.StoreDir); len(created) != 0 {
		t.Fatalf("%d stored through a sink that never answers", len(created))
	}
	e.Hang = false
	c = startChild(t, &e, "sidecar2.log")
	// Timed from when the restarted sidecar is ready, not from its exec: a
	// loaded machine's slow process start is not what this checks.
	t0 := time.Now()
	for i, pd := range pds {
		all[i].res, all[i].err = pd.Wait(ctx)
	}
	took := time.Since(t0)
	t.Logf("restarted sidecar ready to the last result: %v (ack wait %v)", took.Round(time.Millisecond), e.AckWait)
	if took > 10*time.Second {
		t.Errorf("snapshots handed back at SIGTERM took %v after the restart: they waited for the ack wait instead of being redelivered at once", took)
	}
	verify(t, e, all[1:]) // all[0] and all[1] are the same snapshot
	created, _ := readJournal(e.StoreDir)
	for k, c := range created {
		if c != 1 {
			t.Errorf("%s stored %d times", k, c)
		}
	}
	if len(created) != 2 {
		t.Errorf("stored %d keys, want 2", len(created))
	}
	queueEmpty(t, p, c.url)
	c.stop(t)
}
