package ingest

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/nats-io/nats.go/jetstream"
)

// startPrefixSidecar runs a receiver with subject prefix prefix on the NATS
// server at url that answers every snapshot ok; it returns its shm dir.
func startPrefixSidecar(t *testing.T, url, prefix string) string {
	t.Helper()
	shm := filepath.Join(t.TempDir(), "shm")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := Connect(ctx, ConnOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r, err := NewReceiver(ctx, nc, ReceiverConfig{ShmDir: shm, MaxInFlight: 4, Subjects: Subjects{Prefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	jobs := make(chan *Job)
	done := make(chan struct{})
	go r.Run(rctx, jobs)
	go func() {
		defer close(done)
		for j := range jobs {
			j.Complete(context.Background(), Outcome{Key: j.Notice.Run + "/" + j.Notice.Var})
		}
	}()
	t.Cleanup(func() { stop(); <-done; r.Close() })
	return shm
}

// publishWithPrefix sends one snapshot through the sidecar of prefix and
// waits for its result.
func publishWithPrefix(t *testing.T, url, shm, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := Connect(ctx, ConnOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, err := NewProducer(ctx, nc, ProducerOptions{ID: "sim", ShmDir: shm, Subjects: Subjects{Prefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := p.Begin(ctx, Spec{Run: "r", Var: "v", Step: 1, DType: fz.Float32, Dims: []uint64{16}, Mode: fz.Abs, Bound: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := s.Publish(ctx)
	if err != nil {
		t.Fatalf("prefix %s: publish: %v", prefix, err)
	}
	res, err := pd.Wait(ctx)
	if err != nil || !res.OK {
		t.Fatalf("prefix %s: result %+v, %v", prefix, res, err)
	}
}

// Prefixes that differ only in '-'/'_' or case map to the same stream
// names. The second sidecar on a shared server must refuse to start with an
// error naming both prefixes and the stream, and leave the first one's
// streams as they were, instead of taking them over (the first one's
// producers then matched no stream and hung).
func TestStreamsOfOtherPrefixRefused(t *testing.T) {
	ns, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	url := ns.ClientURL()
	shm := startPrefixSidecar(t, url, "fz-node-1")
	publishWithPrefix(t, url, shm, "fz-node-1")

	for _, other := range []string{"fz_node_1", "FZ-NODE-1", "Fz_Node-1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		nc, err := Connect(ctx, ConnOptions{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReceiver(ctx, nc, ReceiverConfig{ShmDir: filepath.Join(t.TempDir(), "shm"), Subjects: Subjects{Prefix: other}})
		if err == nil {
			r.Close()
		}
		nc.Close()
		cancel()
		if !errors.Is(err, ErrStreamOfOtherPrefix) {
			t.Fatalf("second sidecar with prefix %s: %v, want ErrStreamOfOtherPrefix", other, err)
		}
		for _, want := range []string{`"fz-node-1"`, `"` + other + `"`, "FZ_NODE_1_SNAPSHOTS", "--subject-prefix"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("prefix %s: error %q does not mention %s", other, err, want)
			}
		}
	}

	// The first sidecar's streams kept their subjects and it still works.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := Connect(ctx, ConnOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for name, want := range map[string]string{"FZ_NODE_1_SNAPSHOTS": "fz-node-1.snap.>", "FZ_NODE_1_RESULTS": "fz-node-1.result.>"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Subjects; !slices.Equal(got, []string{want}) {
			t.Errorf("%s subjects %v after the refused sidecars, want [%s]", name, got, want)
		}
	}
	publishWithPrefix(t, url, shm, "fz-node-1")

	// A distinct prefix shares the server without trouble, and the same
	// prefix starts again on its own streams (a restart updates them).
	shm2 := startPrefixSidecar(t, url, "fz-node-2")
	publishWithPrefix(t, url, shm2, "fz-node-2")
	_, _, err = EnsureStreams(ctx, js, Subjects{Prefix: "fz-node-1"}, StreamConfig{MaxQueued: 50})
	if err != nil {
		t.Fatalf("same prefix again: %v", err)
	}
	s, _ := js.Stream(ctx, "FZ_NODE_1_SNAPSHOTS")
	if got := s.CachedInfo().Config.MaxMsgs; got != 50 {
		t.Fatalf("same prefix again: MaxMsgs %d, want the new 50 (the stream is updated)", got)
	}
	publishWithPrefix(t, url, shm, "fz-node-1")
}
