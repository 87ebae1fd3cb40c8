package pipeline_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/sidecar"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Device notifications on machines without a GPU: a sidecar that does not
// advertise cuda_ipc refuses them in the receiver; one that does but has no
// DeviceCodec answers device_unsupported from the pipeline; a DeviceCodec's
// coded errors (stale_handle, wrong_device) reach the producer unchanged,
// a device condition a retry may fix (CUDA out of memory) is retried and
// stored, and a failure of one producer's buffer does not stop the next
// snapshot.
func TestDeviceNotifications(t *testing.T) {
	h := base64.StdEncoding.EncodeToString(make([]byte, ingest.IPCHandleBytes))
	note := func(id, producer string) []byte {
		b, _ := json.Marshal(map[string]any{"v": 1, "msg_id": id, "producer": producer, "run": "r", "var": "v", "step": 1,
			"dtype": "f32", "dims": []int{1000}, "mode": "abs", "bound": 0.1, "offset": 0, "length": 4000,
			"device": map[string]any{"gpu": "GPU-00000000-0000-0000-0000-000000000001", "mem_handle": h, "alloc_size": 4096, "event_handle": h}})
		return b
	}
	var oomCalls atomic.Int64
	codec := func(ctx context.Context, n ingest.Notification, p fz.Params) ([]byte, fz.Stats, time.Duration, error) {
		switch n.Producer {
		case "oom": // a device condition a retry may fix: transient, stored on the next delivery
			if oomCalls.Add(1) == 1 {
				return nil, fz.Stats{}, 0, errors.New("compress: CUDA error 2: out of memory")
			}
		case "gone":
			return nil, fz.Stats{}, 0, &ingest.Error{Code: ingest.CodeStaleHandle, Message: "open the memory handle: invalid resource handle"}
		case "other":
			return nil, fz.Stats{}, 0, &ingest.Error{Code: ingest.CodeWrongDevice, Message: "GPU-… is not one this sidecar compresses on"}
		}
		raw := make([]byte, n.Length)
		blob, st, err := fz.Compress(ctx, raw, p)
		return blob, st, 1500 * time.Microsecond, err
	}
	for _, c := range []struct {
		name     string
		features []string
		device   bool
		want     map[string]ingest.Code // producer -> code ("" = stored)
	}{
		{"no feature", nil, false, map[string]ingest.Code{"p": ingest.CodeDeviceUnsupported}},
		{"no codec", []string{ingest.FeatureCUDAIPC}, false, map[string]ingest.Code{"p": ingest.CodeDeviceUnsupported}},
		{"codec", []string{ingest.FeatureCUDAIPC}, true, map[string]ingest.Code{"gone": ingest.CodeStaleHandle,
			"other": ingest.CodeWrongDevice, "oom": "", "p": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			url := runInProcess(t, e, func(cfg *sidecar.Config) {
				cfg.Receiver.Features = c.features
				if c.device {
					cfg.Pipeline.Device = codec
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			nc, js := connectJS(t, ctx, url)
			defer nc.Close()
			var sub ingest.Subjects
			results := make(chan ingest.Result, 16)
			s, err := nc.Subscribe("fz.result.>", func(m *nats.Msg) {
				var r ingest.Result
				if json.Unmarshal(m.Data, &r) == nil {
					results <- r
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Unsubscribe()
			for _, p := range []string{"gone", "other", "oom", "p"} { // the good one last
				if _, ok := c.want[p]; !ok {
					continue
				}
				if _, err := js.Publish(ctx, sub.Snapshot(p), note(p+"-1", p), jetstream.WithMsgID(p+"-1")); err != nil {
					t.Fatal(err)
				}
			}
			for range c.want {
				select {
				case r := <-results:
					want := c.want[r.Producer]
					switch {
					case want == "" && (!r.OK || r.Key == "" || r.GPUSeconds != 0.0015):
						t.Errorf("%s: want stored with gpu_seconds 0.0015, got %+v", r.Producer, r)
					case want != "" && (r.OK || r.Error == nil || r.Error.Code != want):
						t.Errorf("%s: want %s, got %+v", r.Producer, want, r)
					default:
						t.Logf("%s: ok=%v %v", r.Producer, r.OK, r.Error)
					}
				case <-ctx.Done():
					t.Fatal("results missing")
				}
			}
		})
	}
}
