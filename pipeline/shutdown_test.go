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
	e.Listen = freeAddr(t)
	e.StoreDelay = 250 * time.Millisecond
	c := startChild(t, e, "sidecar1.log")
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
	c = startChild(t, e, "sidecar2.log")
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
	url := <-ready
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
