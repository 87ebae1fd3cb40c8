package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
)

// GPU codec failures as the GPU library reports them (cuda/lib.go cerr:
// "<what>: " + fzgpu_strerror), on CPU: a codec that fails like the
// device would. A device condition (out of memory) is handed back and
// retried — the snapshot is stored once the device recovers, or answered
// compress_failed after max_deliver deliveries; bad parameters are
// answered compress_failed at once.
func TestCompressFailureClasses(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      string
		failures int64 // the codec fails this many times, then compresses
		calls    int64
		result   string // "" stored, else the error message must hold it
	}{
		{"OutOfMemoryRecovers", "compress: CUDA error 2: out of memory", 1, 2, ""},
		{"LaunchFailureGivesUp", "compress: CUDA error 719: unspecified launch failure", 99, 3, "gave up after 3 deliveries: compress: CUDA error 719"},
		{"InvalidArgumentAtOnce", "compress: CUDA error 1: invalid argument", 99, 1, "compress: CUDA error 1: invalid argument"},
		{"LibraryArgumentAtOnce", "compress: invalid argument", 99, 1, "compress: invalid argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			var calls atomic.Int64
			cpu := pipeline.FZ()
			url := runInProcess(t, e, func(sc *sidecarConfig) {
				sc.Pipeline.Codec = func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error) {
					if calls.Add(1) <= c.failures {
						return nil, fz.Stats{}, errors.New(c.err)
					}
					return cpu(ctx, src, p)
				}
				sc.Receiver.MaxDeliver = 3
			})
			p := newProducer(t, url, e.ShmDir, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, pd := publishOne(ctx, p, specFor(0), 0)
			if pd == nil {
				t.Fatal("publish failed")
			}
			res, err := waitResult(t, pd, 30*time.Second)
			if c.result == "" {
				if err != nil {
					t.Fatalf("want stored after a retry, got %v", err)
				}
				t.Logf("stored: %s", res.Key)
			} else {
				var ie *ingest.Error
				if !errors.As(err, &ie) || ie.Code != ingest.CodeCompress || !strings.Contains(ie.Message, c.result) {
					t.Fatalf("want compress_failed %q, got %v", c.result, err)
				}
			}
			if n := calls.Load(); n != c.calls {
				t.Errorf("codec called %d times, want %d", n, c.calls)
			}
			queueEmpty(t, p, url)
		})
	}
}
