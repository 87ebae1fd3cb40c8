package pipeline_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/pipeline"
)

// One lane per device: each lane runs one snapshot at a time, and all
// lanes are used.
func TestLanes(t *testing.T) {
	const n = 3
	var busy [n]atomic.Int32
	var used [n]atomic.Int32
	var codecs []pipeline.Codec
	for i := range n {
		codecs = append(codecs, func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error) {
			if busy[i].Add(1) != 1 {
				t.Errorf("lane %d used by two calls at once", i)
			}
			used[i].Add(1)
			time.Sleep(5 * time.Millisecond)
			busy[i].Add(-1)
			return []byte{byte(i)}, fz.Stats{}, nil
		})
	}
	c := pipeline.Lanes(codecs...)
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() { defer wg.Done(); c(context.Background(), nil, fz.Params{}) }()
	}
	wg.Wait()
	for i := range n {
		if used[i].Load() == 0 {
			t.Errorf("lane %d never used", i)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// All lanes free but the context is done: either outcome is fine, it
	// must not block.
	done := make(chan struct{})
	go func() { c(ctx, nil, fz.Params{}); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Lanes blocked with a cancelled context")
	}
}
