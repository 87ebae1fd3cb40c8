package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
)

// DeviceCodec compresses a snapshot lying in a producer's GPU memory (a
// notification with a device reference, docs/PROTOCOL.md §4.1). It must
// return the bytes Codec would for the same field, and return only once
// it has stopped reading the producer's memory: the result then tells the
// producer it may reuse it. Errors carry the protocol's codes
// (*ingest.Error).
//
// gpu is the span of the device work on the snapshot (0 if unknown): the
// result reports it to the producer.
type DeviceCodec func(ctx context.Context, n ingest.Notification, p fz.Params) (blob []byte, st fz.Stats, gpu time.Duration, err error)

// compressDevice is compress for device notifications: no segment, no
// private copy; the codec reads the producer's memory in place.
func (p *pipe) compressDevice(it *item, t0 time.Time) error {
	if p.cfg.Device == nil {
		return &ingest.Error{Code: ingest.CodeDeviceUnsupported, Message: "this sidecar's pipeline has no GPU backend for device memory: run `fzsidecar serve --backend gpu`"}
	}
	blob, st, gpu, err := p.cfg.Device(p.work, it.job.Notice, it.job.Params)
	if err != nil {
		var ie *ingest.Error
		switch {
		case p.work.Err() != nil:
			return context.Cause(p.work)
		case errors.As(err, &ie):
			return err
		}
		// Device conditions a retry may fix (out of memory, a failed
		// launch) are transient, as for host snapshots; the producer's
		// buffer stays valid until its result arrives.
		return classifyCompressErr(err)
	}
	p.cfg.Observer.Stage(StageCompress, time.Since(t0))
	it.blob, it.st, it.gpu = blob, st, gpu
	return nil
}

// traceDevice (FZ_GPU_TRACE=1, as the cuda package's trace) prints each
// device snapshot's host-side phases.
var traceDevice = os.Getenv("FZ_GPU_TRACE") != ""

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// DeviceStats counts GPU-resident snapshots.
type DeviceStats struct {
	Snapshots, Failed uint64
	// GPUTime sums the span of the sidecar's device work per snapshot
	// (first kernel to last copy back; overlapping snapshots both count);
	// EventWait the time spent waiting for producers' events; Stall the
	// time from a snapshot's receipt to the end of the sidecar's reads of
	// its memory (the producer's buffer is reusable once its result
	// arrives, shortly after).
	GPUTime, EventWait, Stall time.Duration
}

type deviceCounters struct {
	prefill           sync.Once // the pinned blob pool, at the first device snapshot
	snapshots, failed atomic.Uint64
	gpu, wait, stall  atomic.Int64
	uuids             atomic.Pointer[map[string]*cuda.Streamer]
}

// Features lists what GPU.Device adds to the protocol, for the receiver's
// status reply: cuda_ipc when at least one device reports its UUID.
func (g *GPU) Features() []string {
	if len(g.streamersByUUID()) == 0 {
		return nil
	}
	return []string{ingest.FeatureCUDAIPC}
}

// DeviceStats reports the GPU-resident snapshots so far.
func (g *GPU) DeviceStats() DeviceStats {
	d := &g.dev
	return DeviceStats{Snapshots: d.snapshots.Load(), Failed: d.failed.Load(), GPUTime: time.Duration(d.gpu.Load()),
		EventWait: time.Duration(d.wait.Load()), Stall: time.Duration(d.stall.Load())}
}

func (g *GPU) streamersByUUID() map[string]*cuda.Streamer {
	if m := g.dev.uuids.Load(); m != nil {
		return *m
	}
	m := map[string]*cuda.Streamer{}
	for _, s := range g.devs {
		u, err := s.UUID()
		if err != nil {
			g.o.Log.Warn("GPU without a UUID: it takes no device snapshots", "device", s.Name(), "err", err)
			continue
		}
		m[u] = s
	}
	g.dev.uuids.Store(&m)
	return m
}

// Device is the pipeline's DeviceCodec: it compresses the snapshot on the
// GPU named by the notification, straight from the producer's memory.
func (g *GPU) Device(ctx context.Context, n ingest.Notification, p fz.Params) (blob []byte, st fz.Stats, gpu time.Duration, err error) {
	d := n.Device
	if d == nil {
		return nil, st, 0, &ingest.Error{Code: ingest.CodeInvalid, Message: "not a device notification"}
	}
	t0 := time.Now()
	defer func() {
		if err != nil {
			g.dev.failed.Add(1)
		}
	}()
	s := g.streamersByUUID()[d.GPU]
	if s == nil {
		var have []string
		for u := range g.streamersByUUID() {
			have = append(have, u)
		}
		return nil, st, 0, &ingest.Error{Code: ingest.CodeWrongDevice, Message: fmt.Sprintf("GPU %s is not one this sidecar compresses on (%v): publish device snapshots to the sidecar of that GPU, or through a segment", d.GPU, have)}
	}
	mem, ev := d.Handles()
	snap := cuda.DeviceSnapshot{Owner: n.Producer, MemHandle: mem, EventHandle: ev, AllocSize: uint64(d.AllocSize),
		Offset: uint64(n.Offset), Length: uint64(n.Length)}
	// A pinned blob where the device lanes assemble snapshots on the GPU
	// (the default) or copy back exact counts (FZ_GPU_EXACT=1): the device
	// writes the compressed bytes in place. The first device snapshot
	// fills the pool with two blobs per device lane (as it waits for the
	// lanes' own memory).
	pinned := cuda.GatherDevice() || cuda.ExactCopyBack()
	if pinned {
		g.dev.prefill.Do(func() { g.pinned.prefill(2*s.DeviceLaneCount()*len(g.devs), snap.Length) })
	}
	snap.Out, snap.OutPinned = g.outFor(snap.Length, pinned)
	t1 := time.Now()
	blob, st, tm, err := s.CompressDevice(ctx, snap, p, g.o.Codec...)
	t2 := time.Now()
	g.outDone(snap.Out, snap.OutPinned, blob, err)
	if traceDevice {
		fmt.Fprintf(os.Stderr, "fzgpu device snapshot: blob %.3fms (pinned %v) compress %.3fms after %.3fms gpu %.3fms\n",
			ms(t1.Sub(t0)), snap.OutPinned, ms(t2.Sub(t1)), ms(time.Since(t2)), ms(tm.GPU))
	}
	g.dev.wait.Add(int64(tm.EventWait))
	g.dev.gpu.Add(int64(tm.GPU))
	g.dev.stall.Add(int64(time.Since(t0)))
	if err != nil {
		code := ingest.Code("")
		switch {
		case errors.Is(err, cuda.ErrWrongDevice):
			code = ingest.CodeWrongDevice
		case errors.Is(err, cuda.ErrStaleHandle):
			code = ingest.CodeStaleHandle
			s.Forget(n.Producer) // its other buffers are likely gone too
		case errors.Is(err, cuda.ErrAllocSize):
			code = ingest.CodeSizeMismatch
		}
		if code != "" {
			return nil, st, 0, &ingest.Error{Code: code, Message: err.Error()}
		}
		return nil, st, 0, err
	}
	g.dev.snapshots.Add(1)
	if _, seen := g.laneNoted.LoadOrStore(s, true); !seen {
		// Said now, not only at shutdown: a user sharing the GPU with a
		// large simulation wants to know at once that the lanes did not fit.
		if lanes, tiles, lerr := s.DeviceLanes(); lerr != nil {
			g.o.Log.Warn("GPU-resident snapshots run on the host lanes: the device lanes could not be allocated (fewer with --gpu-device-lanes)", "device", s.Name(), "err", lerr)
		} else {
			g.o.Log.Info("device lanes allocated for GPU-resident snapshots", "device", s.Name(), "lanes", lanes, "job_tiles", tiles)
		}
	}
	if g.o.Log.Enabled(ctx, -4) { // debug
		g.o.Log.Debug("device snapshot", "producer", n.Producer, "bytes", n.Length, "gpu_ms", tm.GPU.Seconds()*1e3, "event_wait_ms", tm.EventWait.Seconds()*1e3)
	}
	return blob, st, tm.GPU, nil
}

// DeviceLanes is how many lanes the GPUs give GPU-resident snapshots and
// their tiles per job (the first device's; 0 before the first device
// snapshot).
func (g *GPU) DeviceLanes() (lanes int, jobTiles uint64) {
	for _, s := range g.devs {
		n, t, _ := s.DeviceLanes()
		lanes += n
		jobTiles = max(jobTiles, t)
	}
	return lanes, jobTiles
}

// logDeviceStats says at shutdown what GPU-resident snapshots cost.
func (g *GPU) logDeviceStats() {
	d := g.DeviceStats()
	if d.Snapshots+d.Failed == 0 {
		return
	}
	n := float64(max(d.Snapshots+d.Failed, 1))
	live, bytes, _ := g.pinned.stats()
	g.o.Log.Info("device snapshots", "stored", d.Snapshots, "failed", d.Failed,
		"gpu_seconds", d.GPUTime.Seconds(), "gpu_ms_per_snapshot", d.GPUTime.Seconds()*1e3/n,
		"event_wait_ms_per_snapshot", d.EventWait.Seconds()*1e3/n, "read_ms_per_snapshot", d.Stall.Seconds()*1e3/n,
		"pinned_blobs", live, "pinned_blob_bytes", bytes)
	if err := g.pinned.err(); err != nil {
		g.o.Log.Warn("no pinned blobs for device snapshots: their bytes went through Go memory (slower)", "err", err)
	}
	for _, s := range g.devs {
		lanes, tiles, err := s.DeviceLanes()
		if err != nil {
			g.o.Log.Warn("device snapshots ran on the host lanes: the device lanes could not be allocated", "device", s.Name(), "err", err)
		} else if lanes > 0 {
			g.o.Log.Info("device lanes", "device", s.Name(), "lanes", lanes, "job_tiles", tiles)
		}
	}
}
