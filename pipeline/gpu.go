package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
)

// HostMode is how snapshot bytes reach a GPU.
type HostMode string

const (
	// HostRegister page-locks the segment's mapping (cudaHostRegister,
	// read-only) so the copy engine reads it in place, and keeps the
	// registration while the producer reuses the segment; where
	// registration fails it stages instead.
	HostRegister HostMode = "register"
	// HostStage copies every snapshot through a pinned staging ring.
	HostStage HostMode = "stage"
)

// minRegister is the smallest snapshot worth registering: below it the
// staging copy costs less than a registration.
const minRegister = 4 << 20

// GPUOptions configure GPU.
type GPUOptions struct {
	Host HostMode // default HostRegister
	// PinCacheBytes bounds the registered segments kept between snapshots
	// (default 16 GiB). They are the producer's own pages: while its files
	// exist the cache costs no memory; once unlinked, their pages are freed
	// at the next sweep (PinSweep).
	PinCacheBytes int64
	Log           *slog.Logger
	Codec         []fz.Option
}

// GPUStats counts how snapshots reached the GPUs.
type GPUStats struct {
	Registered, CacheHits, Staged, RegisterFailed uint64
	// Snapshots compressed; LaneWait is their summed wait for a free lane,
	// LaneBusy the summed time they held one (busy / (lanes × wall time)
	// is the lanes' utilisation).
	Snapshots          uint64
	LaneWait, LaneBusy time.Duration
}

// GPU is the direct codec over one Streamer per device: each snapshot goes
// to a free lane of any device, straight from its shared-memory mapping.
type GPU struct {
	o     GPUOptions
	devs  []*cuda.Streamer
	free  chan *cuda.Streamer // one token per lane of each device
	blobs chan []byte         // released blobs, reused as outputs
	cache *pinCache
	stats struct {
		registered, hits, staged, failed, snapshots atomic.Uint64
		wait, busy                                  atomic.Int64 // ns
	}
	warn sync.Once
	// laneNoted: the devices whose device lanes were reported (at their
	// first GPU-resident snapshot, when they are allocated)
	laneNoted sync.Map
	dev       deviceCounters // GPU-resident snapshots (device.go)
	// pinned: page-locked blobs for GPU-resident snapshots (pinnedblobs.go)
	pinned *pinnedBlobs
}

// NewGPU spreads snapshots over the streamers' lanes.
func NewGPU(streamers []*cuda.Streamer, o GPUOptions) *GPU {
	if o.Host == "" {
		o.Host = HostRegister
	}
	if o.PinCacheBytes <= 0 {
		o.PinCacheBytes = 16 << 30
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	n := 0
	for _, s := range streamers {
		n += s.Lanes()
	}
	g := &GPU{o: o, devs: streamers, free: make(chan *cuda.Streamer, n), blobs: make(chan []byte, 2*n+8), cache: newPinCache(o.PinCacheBytes, cuda.RegisterHost, cuda.UnregisterHost),
		pinned: newPinnedBlobs(cuda.AllocPinned, cuda.FreePinned)}
	// Interleave devices so a lone snapshot goes to the first device and
	// two go to different ones.
	for i := 0; len(g.free) < n; i++ {
		for _, s := range streamers {
			if i < s.Lanes() {
				g.free <- s
			}
		}
	}
	return g
}

// Lanes is how many snapshots the GPUs compress at once (at least what
// Config.Compressors should be): the host lanes plus the lanes of
// GPU-resident snapshots, which are apart (cuda.Streamer.DeviceLaneCount).
// With only the host lanes' count of compressors, device snapshots would
// reach 4 of their 8 lanes (seen on an H100: 196 GB/s, each lane busy
// 12 ms per 1 GiB snapshot, docs/PIPELINE.md).
func (g *GPU) Lanes() int {
	n := cap(g.free)
	for _, s := range g.devs {
		n += s.DeviceLaneCount()
	}
	return n
}

// HostLanes is how many snapshots in host memory the GPUs compress at
// once (Lanes without the lanes of GPU-resident snapshots).
func (g *GPU) HostLanes() int { return cap(g.free) }

// Stats counts how snapshots reached the GPUs so far.
func (g *GPU) Stats() GPUStats {
	return GPUStats{Registered: g.stats.registered.Load(), CacheHits: g.stats.hits.Load(),
		Staged: g.stats.staged.Load(), RegisterFailed: g.stats.failed.Load(), Snapshots: g.stats.snapshots.Load(),
		LaneWait: time.Duration(g.stats.wait.Load()), LaneBusy: time.Duration(g.stats.busy.Load())}
}

// PinnedH2D measures the pinned host-to-device bandwidth of all devices at
// once (bytes per second, summed): the ceiling for ingest, since every raw
// byte crosses PCIe once. It takes one lane per device while it runs.
func (g *GPU) PinnedH2D(ctx context.Context, bytes uint64) (float64, error) {
	bps := make([]float64, len(g.devs))
	errs := make([]error, len(g.devs))
	var wg sync.WaitGroup
	for i, s := range g.devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bps[i], errs[i] = s.PinnedH2D(ctx, bytes, 10)
		}()
	}
	wg.Wait()
	sum := 0.0
	for i := range bps {
		if errs[i] != nil {
			return 0, errs[i]
		}
		sum += bps[i]
	}
	return sum, nil
}

// Release takes a blob back once the pipeline is done with it (the
// pipeline's Config.Release): the next snapshot's output reuses it.
func (g *GPU) Release(blob []byte) {
	if g.pinned.put(blob) {
		return
	}
	select {
	case g.blobs <- blob[:0]:
	default:
	}
}

// outFor is the blob a snapshot of raw bytes goes into: a pinned one
// where its lanes copy the compressed bytes into it in place (device
// snapshots assembled on the GPU, or FZ_GPU_EXACT=1), else a released Go
// blob.
func (g *GPU) outFor(raw uint64, exact bool) ([]byte, bool) {
	if exact {
		if b := g.pinned.get(raw); b != nil {
			return b, true
		}
	}
	return g.outBuf(), false
}

// outDone notes the size a snapshot needed and takes a pinned blob back
// at once if the snapshot did not end up in it (an error, or it outgrew it).
func (g *GPU) outDone(out []byte, pinned bool, blob []byte, err error) {
	if err == nil && len(blob) > 0 {
		g.pinned.noteNeed(uint64(len(blob)))
	}
	if pinned && (err != nil || unsafe.SliceData(blob) != unsafe.SliceData(out[:1])) {
		g.pinned.put(out)
	}
}

func (g *GPU) outBuf() []byte {
	select {
	case b := <-g.blobs:
		return b
	default:
		return nil
	}
}

// Close drops every cached registration (no Direct call may be running).
func (g *GPU) Close() error {
	g.logDeviceStats()
	g.cache.close()
	g.pinned.close()
	return nil
}

// Direct is the pipeline's DirectCodec.
func (g *GPU) Direct(ctx context.Context, m *ingest.Mapping, p fz.Params) ([]byte, fz.Stats, error) {
	var s *cuda.Streamer
	t0 := time.Now()
	select {
	case s = <-g.free:
	case <-ctx.Done():
		m.Close()
		return nil, fz.Stats{}, context.Cause(ctx)
	}
	t1 := time.Now()
	defer func() {
		g.stats.snapshots.Add(1)
		g.stats.wait.Add(int64(t1.Sub(t0)))
		g.stats.busy.Add(int64(time.Since(t1)))
		g.free <- s
	}()
	if g.o.Host == HostRegister && m.Len() >= minRegister {
		e, hit, err := g.cache.acquire(m)
		if err == nil {
			defer g.cache.release(e)
			if hit {
				g.stats.hits.Add(1)
			} else {
				g.stats.registered.Add(1)
			}
			out, pinned := g.outFor(uint64(m.Len()), cuda.ExactCopyBack())
			blob, st, err := s.Compress(ctx, cuda.Source{Bytes: e.m.Bytes(), Pinned: true, Out: out, OutPinned: pinned}, p, g.o.Codec...)
			g.outDone(out, pinned, blob, err)
			return blob, st, err
		}
		g.stats.failed.Add(1)
		g.warn.Do(func() {
			g.o.Log.Warn("cannot register segments as pinned memory; staging them instead (slower)", "err", err)
		})
	}
	defer m.Close()
	g.stats.staged.Add(1)
	return s.Compress(ctx, cuda.Source{Bytes: m.Bytes(), Copy: ingest.GuardedCopy, Out: g.outBuf()}, p, g.o.Codec...)
}

// pinCache keeps segments' mappings registered between snapshots, keyed by
// what identifies their pages (ingest.SegmentID). An entry is dropped when
// its file is unlinked, resized or changed, when idle for pinIdle, or to
// make room (least recently used first); never while a snapshot uses it.
type pinCache struct {
	mu         sync.Mutex
	entries    map[ingest.SegmentID]*pinEntry
	bytes      int64
	limit      int64
	register   func([]byte) error
	unregister func([]byte) error
	now        func() time.Time
	stop       chan struct{}
	stopped    sync.WaitGroup
}

type pinEntry struct {
	id     ingest.SegmentID
	m      *ingest.Mapping
	refs   int
	used   time.Time
	cached bool // in entries; a private entry is dropped at its release
}

const (
	pinSweep = time.Second      // how often unlinked or changed segments are looked for
	pinIdle  = 30 * time.Second // an unused registration is dropped after this
)

func newPinCache(limit int64, register, unregister func([]byte) error) *pinCache {
	c := &pinCache{entries: map[ingest.SegmentID]*pinEntry{}, limit: limit, register: register,
		unregister: unregister, now: time.Now, stop: make(chan struct{})}
	c.stopped.Add(1)
	go func() {
		defer c.stopped.Done()
		t := time.NewTicker(pinSweep)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.sweep()
			}
		}
	}()
	return c
}

// acquire returns a registered mapping with m's contents and whether it was
// registered already. It takes m over on success (closing it on a hit); on
// error m is still the caller's.
func (c *pinCache) acquire(m *ingest.Mapping) (e *pinEntry, hit bool, err error) {
	id, err := m.ID()
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	// id was read from the file just opened by name, so an entry under it
	// maps that very inode at that size and change time.
	if e := c.entries[id]; e != nil {
		e.refs++
		e.used = c.now()
		c.mu.Unlock()
		m.Close()
		return e, true, nil
	}
	c.mu.Unlock()
	if err := c.register(m.Pages()); err != nil {
		return nil, false, fmt.Errorf("register segment: %w", err)
	}
	e = &pinEntry{id: id, m: m, refs: 1, used: c.now()}
	size := int64(len(m.Pages()))
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[id]; old != nil {
		if old.refs > 0 {
			return e, false, nil // the same region twice at once: this one stays private
		}
		c.dropLocked(old)
	}
	for c.bytes+size > c.limit {
		var lru *pinEntry
		for _, x := range c.entries {
			if x.refs == 0 && (lru == nil || x.used.Before(lru.used)) {
				lru = x
			}
		}
		if lru == nil {
			return e, false, nil // everything cached is in use: private
		}
		c.dropLocked(lru)
	}
	e.cached = true
	c.entries[id] = e
	c.bytes += size
	return e, false, nil
}

// release ends a snapshot's use of an entry.
func (c *pinCache) release(e *pinEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	e.used = c.now()
	if !e.cached && e.refs == 0 {
		c.unregister(e.m.Pages())
		e.m.Close()
	}
}

// dropLocked removes an unused entry and frees its registration.
func (c *pinCache) dropLocked(e *pinEntry) {
	delete(c.entries, e.id)
	e.cached = false
	c.bytes -= int64(len(e.m.Pages()))
	c.unregister(e.m.Pages())
	e.m.Close()
}

// sweep drops unused entries whose file was unlinked or changed (the
// producer gets its memory back) or that sat idle for pinIdle.
func (c *pinCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, e := range c.entries {
		if e.refs == 0 && (now.Sub(e.used) > pinIdle || e.m.Stale(e.id)) {
			c.dropLocked(e)
		}
	}
}

// size is the registered bytes held and the number of entries.
func (c *pinCache) size() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, len(c.entries)
}

func (c *pinCache) close() {
	close(c.stop)
	c.stopped.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.refs == 0 {
			c.dropLocked(e)
		}
	}
}
