package pipeline_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
)

// GPU.Device on a real GPU without a producer: it advertises cuda_ipc,
// answers a notification for a GPU it does not have wrong_device and one
// whose handles do not open stale_handle, and keeps working. (Snapshots
// from a real producer process: cuda TestDeviceIPC, run_device.sh.)
func TestGPUDeviceRefusals(t *testing.T) {
	s := gpuStreamer(t, cuda.StreamOptions{ArenaBytes: 16 << 20, JobTiles: 512, Lanes: 1})
	g := pipeline.NewGPU([]*cuda.Streamer{s}, pipeline.GPUOptions{})
	defer g.Close()
	if f := g.Features(); len(f) != 1 || f[0] != ingest.FeatureCUDAIPC {
		t.Fatalf("features %v", f)
	}
	uuid, err := s.UUID()
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, ingest.IPCHandleBytes)
	for i := range junk {
		junk[i] = byte(3*i + 1)
	}
	h := base64.StdEncoding.EncodeToString(junk)
	p := fz.Params{DType: fz.Float32, Dims: []uint64{1024}, Mode: fz.Abs, Bound: 1e-3}
	n := ingest.Notification{Producer: "p", MsgID: "p-1", Length: 4096,
		Device: &ingest.DeviceRef{GPU: "GPU-00000000-0000-0000-0000-000000000000", MemHandle: h, EventHandle: h, AllocSize: 4096}}
	for _, c := range []struct {
		gpu  string
		code ingest.Code
	}{{"GPU-00000000-0000-0000-0000-000000000000", ingest.CodeWrongDevice}, {uuid, ingest.CodeStaleHandle}} {
		n.Device.GPU = c.gpu
		_, _, _, err := g.Device(context.Background(), n, p)
		var ie *ingest.Error
		if !errors.As(err, &ie) || ie.Code != c.code || !strings.Contains(ie.Message, "GPU") && c.code == ingest.CodeWrongDevice {
			t.Fatalf("%s: got %v, want %s", c.gpu, err, c.code)
		}
		t.Logf("%s -> %v", c.gpu, err)
	}
	if d := g.DeviceStats(); d.Failed != 2 || d.Snapshots != 0 {
		t.Fatalf("stats %+v", d)
	}
	// the device still compresses host snapshots
	raw := make([]byte, 4096)
	if _, _, err := s.Compress(context.Background(), cuda.Source{Bytes: raw}, p); err != nil {
		t.Fatal(err)
	}
}
