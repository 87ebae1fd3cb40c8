package ingest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func deviceNotice() map[string]any {
	m := validNotice()
	delete(m, "segment")
	h := base64.StdEncoding.EncodeToString(make([]byte, IPCHandleBytes))
	m["offset"] = 512
	m["device"] = map[string]any{"gpu": "GPU-0123ABCD-4567-89ab-cdef-0123456789ab", "mem_handle": h,
		"alloc_size": 512 + 4*5*6*4, "event_handle": h}
	return m
}

func TestDecodeDevice(t *testing.T) {
	n, p, _, err := DecodeNotification(encode(t, deviceNotice()))
	if err != nil {
		t.Fatal(err)
	}
	if n.Device == nil || n.Segment != "" || n.Offset != 512 || n.HostBytes() != 0 || p.DType.Size() != 4 {
		t.Fatalf("notice %+v", n)
	}
	if n.Device.GPU != "GPU-0123abcd-4567-89ab-cdef-0123456789ab" {
		t.Fatalf("uuid not normalised: %q", n.Device.GPU)
	}
	// Round trip: a notification without a segment omits it.
	b, _ := json.Marshal(&n)
	if strings.Contains(string(b), `"segment"`) {
		t.Fatalf("segment written for a device notification: %s", b)
	}
	if _, _, _, err := DecodeNotification(b); err != nil {
		t.Fatalf("re-decode: %v", err)
	}
	var u [16]byte
	for i := range u {
		u[i] = byte(i * 17)
	}
	if got := FormatGPUUUID(u); got != "GPU-00112233-4455-6677-8899-aabbccddeeff" {
		t.Fatalf("FormatGPUUUID: %s", got)
	}
}

func TestDecodeDeviceRejects(t *testing.T) {
	dev := func(m map[string]any) map[string]any { return m["device"].(map[string]any) }
	cases := []struct {
		name string
		mut  func(m map[string]any)
		code Code
		want string
	}{
		{"segment and device", func(m map[string]any) { m["segment"] = "x.seg" }, CodeInvalid, "both"},
		{"uuid", func(m map[string]any) { dev(m)["gpu"] = "0" }, CodeInvalid, "nvidia-smi"},
		{"short handle", func(m map[string]any) { dev(m)["mem_handle"] = base64.StdEncoding.EncodeToString(make([]byte, 63)) }, CodeInvalid, "63 bytes"},
		{"not base64", func(m map[string]any) { dev(m)["event_handle"] = "@@@" }, CodeInvalid, "not base64"},
		{"no event", func(m map[string]any) { delete(dev(m), "event_handle") }, CodeInvalid, "device.event_handle"},
		{"no alloc size", func(m map[string]any) { delete(dev(m), "alloc_size") }, CodeInvalid, "alloc_size"},
		{"beyond allocation", func(m map[string]any) { dev(m)["alloc_size"] = 512 + 4*5*6*4 - 4 }, CodeSizeMismatch, "beyond the device allocation"},
		{"device not object", func(m map[string]any) { m["device"] = "gpu0" }, CodeMalformed, ""},
		{"size lie", func(m map[string]any) { m["length"] = 4 }, CodeSizeMismatch, "need 480"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := deviceNotice()
			c.mut(m)
			_, _, _, err := DecodeNotification(encode(t, m))
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code || !strings.Contains(e.Message, c.want) {
				t.Fatalf("got %v, want code %s mentioning %q", err, c.code, c.want)
			}
		})
	}
}

// A sidecar without the cuda_ipc feature answers device notifications
// with device_unsupported (and keeps serving); one with it advertises the
// feature in its status reply and hands the job on, charging no budget.
func TestReceiverDeviceFeature(t *testing.T) {
	for _, feature := range []bool{false, true} {
		t.Run(map[bool]string{false: "without", true: "with"}[feature], func(t *testing.T) {
			ns, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer ns.Shutdown()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			nc, err := Connect(ctx, ConnOptions{URL: ns.ClientURL()})
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			cfg := ReceiverConfig{ShmDir: t.TempDir(), MaxInFlight: 2, Budget: 100}
			if feature {
				cfg.Features = []string{FeatureCUDAIPC}
			}
			r, err := NewReceiver(ctx, nc, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			jobs := make(chan *Job, 2)
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			go r.Run(rctx, jobs)

			rep, err := nc.Request(Subjects{}.Status(), []byte("{}"), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var st Status
			if err := json.Unmarshal(rep.Data, &st); err != nil {
				t.Fatal(err)
			}
			if st.HasFeature(FeatureCUDAIPC) != feature {
				t.Fatalf("status %s: features %v", rep.Data, st.Features)
			}

			results, err := nc.SubscribeSync(Subjects{}.ProducerResults("p1"))
			if err != nil {
				t.Fatal(err)
			}
			m := deviceNotice()
			m["length"], m["dims"] = 4*1000, []uint64{1000} // larger than the 100-byte budget: device bytes are not charged
			m["device"].(map[string]any)["alloc_size"] = 512 + 4000
			js, _ := jetstream.New(nc)
			if _, err := js.Publish(ctx, Subjects{}.Snapshot("p1"), encode(t, m), jetstream.WithMsgID("p1-0001")); err != nil {
				t.Fatal(err)
			}
			if !feature {
				msg, err := results.NextMsg(10 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				var res Result
				json.Unmarshal(msg.Data, &res)
				if res.OK || res.Error == nil || res.Error.Code != CodeDeviceUnsupported || !strings.Contains(res.Error.Message, "cuda_ipc") {
					t.Fatalf("result %s", msg.Data)
				}
				return
			}
			select {
			case j := <-jobs:
				if j.Notice.Device == nil {
					t.Fatalf("job without device: %+v", j.Notice)
				}
				if used, _ := r.Budget().Used(); used != 0 {
					t.Fatalf("device snapshot charged %d budget bytes", used)
				}
				j.Fail(ctx, &Error{Code: CodeStaleHandle, Message: "test"})
			case <-ctx.Done():
				t.Fatal("no job")
			}
			msg, err := results.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(msg.Data), string(CodeStaleHandle)) {
				t.Fatalf("result %s", msg.Data)
			}
		})
	}
}
