package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// GPU-resident snapshots: a simulation on this GPU exports the allocation
// holding a field (cudaIpcGetMemHandle) and an event recorded after its
// last write (cudaIpcGetEventHandle); the streamer opens both once per
// producer buffer, waits for the event and compresses the field in place
// on its lowest-priority streams. Only the compressed chunks cross PCIe.

// Errors of CompressDevice, told apart with errors.Is.
var (
	// ErrWrongDevice: the memory lies on another GPU than this streamer's.
	ErrWrongDevice = errors.New("the IPC memory lies on another GPU")
	// ErrStaleHandle: a handle cannot be opened (its producer exited or
	// freed the memory, or it is not from this node), or the producer's
	// event did not complete in time.
	ErrStaleHandle = errors.New("stale CUDA IPC handle")
	// ErrAllocSize: the allocation differs from what the producer said,
	// or the snapshot does not fit in it.
	ErrAllocSize = errors.New("snapshot outside the IPC allocation")
)

// ipcFuncs are the ABI 5 entry points (ipc.cu).
type ipcFuncs struct {
	deviceUUID func(dev int32, uuid *byte) int32
	streamPrio func(dev int32, lowest int32, s *uintptr, prio *int32) int32
	openMem    func(dev int32, h *byte, base *uintptr, size *uint64) int32
	closeMem   func(dev int32, base uintptr) int32
	openEvent  func(dev int32, h *byte, ev *uintptr) int32
	eventQuery func(dev int32, ev uintptr) int32
	exportMem  func(dev int32, ptr uintptr, h *byte) int32
	eventIPC   func(dev int32, ev *uintptr, h *byte) int32
}

func (f *ipcFuncs) register(reg func(fn any, name string) error) error {
	for _, x := range []struct {
		fn   any
		name string
	}{
		{&f.deviceUUID, "fzgpu_device_uuid"}, {&f.streamPrio, "fzgpu_stream_create_priority"},
		{&f.openMem, "fzgpu_ipc_open_mem"}, {&f.closeMem, "fzgpu_ipc_close_mem"},
		{&f.openEvent, "fzgpu_ipc_open_event"}, {&f.eventQuery, "fzgpu_event_query"},
		{&f.exportMem, "fzgpu_ipc_export_mem"}, {&f.eventIPC, "fzgpu_ipc_event_create"},
	} {
		if err := reg(x.fn, x.name); err != nil {
			return err
		}
	}
	return nil
}

func (f *ipcFuncs) streamPriority(dev int32, lowest int32, s *uintptr, prio *int32) int32 {
	return f.streamPrio(dev, lowest, s, prio)
}

const (
	rcWrongDevice = 5 // FZGPU_E_WRONGDEVICE
	rcNotReady    = 6 // FZGPU_E_NOTREADY
)

// UUID is the device's UUID as nvidia-smi -L prints it (GPU-xxxxxxxx-…).
func (s *Streamer) UUID() (string, error) {
	var u [16]byte
	if err := s.lib.cerr(s.lib.ipc.deviceUUID(s.dev, &u[0]), "device UUID"); err != nil {
		return "", err
	}
	const hx = "0123456789abcdef"
	b := []byte("GPU-")
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hx[c>>4], hx[c&15])
	}
	return string(b), nil
}

// DeviceSnapshot is a snapshot in another process's memory on this GPU.
type DeviceSnapshot struct {
	// Owner scopes the cache of opened handles (the producer id): one
	// producer cannot reach another's mapping by replaying its handle.
	Owner       string
	MemHandle   [64]byte
	EventHandle [64]byte
	// AllocSize is the allocation's size as the producer reports it; the
	// opened mapping must have exactly this size.
	AllocSize      uint64
	Offset, Length uint64
	// EventTimeout bounds the wait for the producer's event (default 60 s).
	EventTimeout time.Duration
	// Out, if large enough, receives the blob (as Source.Out); OutPinned
	// says it is page-locked (AllocPinned): the compressed bytes then go
	// from the device straight into it (Source.OutPinned).
	Out       []byte
	OutPinned bool
}

// DeviceTiming is what a device snapshot cost.
type DeviceTiming struct {
	EventWait time.Duration // until the producer's event had completed
	GPU       time.Duration // span of the streamer's device work
}

// CompressDevice compresses a snapshot in another process's device memory
// in place; the bytes equal fz.Compress's of the same field. It returns
// once the streamer has stopped reading the memory (also on error): the
// producer may then reuse it.
func (s *Streamer) CompressDevice(ctx context.Context, d DeviceSnapshot, p fz.Params, opts ...fz.Option) ([]byte, fz.Stats, DeviceTiming, error) {
	var tm DeviceTiming
	m, err := s.ipc.mem(s, d.Owner, d.MemHandle)
	if err != nil {
		return nil, fz.Stats{}, tm, err
	}
	defer s.ipc.release(m)
	if m.size != d.AllocSize {
		return nil, fz.Stats{}, tm, fmt.Errorf("%w: the handle exports an allocation of %d bytes, the notification says %d", ErrAllocSize, m.size, d.AllocSize)
	}
	if d.Offset > m.size || d.Length > m.size-d.Offset {
		return nil, fz.Stats{}, tm, fmt.Errorf("%w: bytes [%d, %d) lie beyond the allocation of %d bytes", ErrAllocSize, d.Offset, d.Offset+d.Length, m.size)
	}
	ev, err := s.ipc.event(s, d.Owner, d.EventHandle)
	if err != nil {
		return nil, fz.Stats{}, tm, err
	}
	defer s.ipc.release(ev)
	t0 := time.Now()
	if err := s.waitEvent(ctx, ev.handle, cmp(d.EventTimeout, 60*time.Second)); err != nil {
		return nil, fz.Stats{}, tm, err
	}
	tm.EventWait = time.Since(t0)
	src := Source{Device: m.base + uintptr(d.Offset), DeviceBytes: d.Length, Out: d.Out, OutPinned: d.OutPinned, GPUTime: &tm.GPU}
	if d.Length == 0 {
		src.Device = 0
	}
	out, st, err := s.Compress(ctx, src, p, opts...)
	return out, st, tm, err
}

func cmp(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// waitEvent polls the producer's event from the host rather than making a
// stream wait for it: an event whose producer died before its work ran
// would hold the lane's streams for ever, a poll gives up after timeout.
func (s *Streamer) waitEvent(ctx context.Context, ev uintptr, timeout time.Duration) error {
	l := s.lib
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		rc := l.ipc.eventQuery(s.dev, ev)
		switch {
		case rc == 0:
			return nil
		case rc != rcNotReady:
			return fmt.Errorf("%w: the producer's event: %v", ErrStaleHandle, l.cerr(rc, "query"))
		case ctx.Err() != nil:
			return fmt.Errorf("waiting for the producer's event: %w", context.Cause(ctx))
		case time.Now().After(deadline):
			return fmt.Errorf("%w: the producer's event did not complete within %v (its work never ran, or it recorded the event again)", ErrStaleHandle, timeout)
		}
		// 20 µs steps for the first millisecond, then 1 ms
		if i < 50 {
			time.Sleep(20 * time.Microsecond)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

// copyFromDevice copies len(dst) bytes at device address src to dst.
func (s *Streamer) copyFromDevice(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	l := s.lib
	s.upMu.Lock()
	defer s.upMu.Unlock()
	if err := l.cerr(l.copyD2H(s.dev, unsafe.Pointer(unsafe.SliceData(dst)), src, uint64(len(dst)), 2, s.up), "copy from GPU"); err != nil {
		return err
	}
	return l.cerr(l.streamSync(s.dev, s.up), "copy from GPU")
}

// gpuSpan waits for every stream of the lane and writes the time from
// gt0 (recorded before the snapshot's first kernel) to now on the device.
func (ln *lane) gpuSpan(out *time.Duration) error {
	s, l := ln.s, ln.s.lib
	s0 := ln.sl[0]
	for _, sl := range ln.sl[1:] {
		if err := l.cerr(l.streamWait(s.dev, s0.stream, sl.done), "stream wait"); err != nil {
			return err
		}
	}
	if ln.g.cpDone != 0 { // the copies back of a snapshot assembled on the device
		if err := l.cerr(l.streamWait(s.dev, s0.stream, ln.g.cpDone), "stream wait"); err != nil {
			return err
		}
	}
	if err := l.cerr(l.eventRecord(s.dev, ln.gt1, s0.stream), "record event"); err != nil {
		return err
	}
	if err := l.cerr(l.eventSync(s.dev, ln.gt1), "GPU time"); err != nil {
		return err
	}
	var ms float32
	if err := l.cerr(l.eventElapsed(s.dev, ln.gt0, ln.gt1, &ms), "GPU time"); err != nil {
		return err
	}
	*out = time.Duration(float64(ms) * 1e6)
	return nil
}

// ipcCache keeps opened IPC memory and events while their producer reuses
// them (opening costs a driver call and, for memory, a new mapping). An
// entry unused for ipcIdle is closed, as are the least recently used once
// more than ipcMaxEntries are open; never one in use.
type ipcCache struct {
	mu      sync.Mutex
	entries map[ipcKey]*ipcEntry
}

type ipcKey struct {
	owner string
	event bool
	h     [64]byte
}

type ipcEntry struct {
	key    ipcKey
	base   uintptr // memory: the allocation's base
	size   uint64
	handle uintptr // event
	refs   int
	used   time.Time
}

const (
	ipcIdle       = 30 * time.Second
	ipcMaxEntries = 128
)

// IPCOpen is how many IPC memory mappings and events are open (tests).
func (s *Streamer) IPCOpen() (mems, events int) {
	s.ipc.mu.Lock()
	defer s.ipc.mu.Unlock()
	for k := range s.ipc.entries {
		if k.event {
			events++
		} else {
			mems++
		}
	}
	return mems, events
}

func (c *ipcCache) mem(s *Streamer, owner string, h [64]byte) (*ipcEntry, error) {
	return c.get(s, ipcKey{owner: owner, h: h}, func(e *ipcEntry) error {
		rc := s.lib.ipc.openMem(s.dev, &e.key.h[0], &e.base, &e.size)
		switch {
		case rc == rcWrongDevice:
			return fmt.Errorf("%w (this sidecar compresses on %s)", ErrWrongDevice, s.name)
		case rc != 0:
			return fmt.Errorf("%w: open the memory handle: %v", ErrStaleHandle, s.lib.cerr(rc, "cudaIpcOpenMemHandle"))
		}
		return nil
	})
}

func (c *ipcCache) event(s *Streamer, owner string, h [64]byte) (*ipcEntry, error) {
	return c.get(s, ipcKey{owner: owner, event: true, h: h}, func(e *ipcEntry) error {
		if rc := s.lib.ipc.openEvent(s.dev, &e.key.h[0], &e.handle); rc != 0 {
			return fmt.Errorf("%w: open the event handle: %v", ErrStaleHandle, s.lib.cerr(rc, "cudaIpcOpenEventHandle"))
		}
		return nil
	})
}

func (c *ipcCache) get(s *Streamer, k ipcKey, open func(*ipcEntry) error) (*ipcEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if e := c.entries[k]; e != nil {
		e.refs++
		e.used = now
		return e, nil
	}
	c.evictLocked(s, now)
	e := &ipcEntry{key: k, refs: 1, used: now}
	if err := open(e); err != nil {
		return nil, err
	}
	if c.entries == nil {
		c.entries = map[ipcKey]*ipcEntry{}
	}
	c.entries[k] = e
	return e, nil
}

func (c *ipcCache) release(e *ipcEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	e.used = time.Now()
}

// Forget closes an owner's unused mappings and events at once (a producer
// reported gone); used ones close when idle.
func (s *Streamer) Forget(owner string) {
	c := &s.ipc
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if k.owner == owner && e.refs == 0 {
			c.closeLocked(s, e)
		}
	}
}

func (c *ipcCache) evictLocked(s *Streamer, now time.Time) {
	for _, e := range c.entries {
		if e.refs == 0 && now.Sub(e.used) > ipcIdle {
			c.closeLocked(s, e)
		}
	}
	for len(c.entries) >= ipcMaxEntries {
		var lru *ipcEntry
		for _, e := range c.entries {
			if e.refs == 0 && (lru == nil || e.used.Before(lru.used)) {
				lru = e
			}
		}
		if lru == nil {
			return
		}
		c.closeLocked(s, lru)
	}
}

func (c *ipcCache) closeLocked(s *Streamer, e *ipcEntry) {
	delete(c.entries, e.key)
	if e.key.event {
		s.lib.eventDestroy(s.dev, e.handle)
	} else {
		s.lib.ipc.closeMem(s.dev, e.base)
	}
}

// close drops every entry (Streamer.Close: nothing runs).
func (c *ipcCache) close(s *Streamer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		c.closeLocked(s, e)
	}
}
