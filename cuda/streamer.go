package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// StreamOptions configure a Streamer. Zero values take the defaults.
type StreamOptions struct {
	// Lanes is how many snapshots one device compresses at once (default
	// 4): while one lane's kernels and host-side work (index, checksums)
	// run, the others' copies keep the PCIe link busy, so even rel
	// snapshots (whose range must be known before any tile is encoded) are
	// hidden behind the copy.
	Lanes int
	// Streams is the CUDA streams per lane (default 3): the copy of job
	// i+1, the kernels of job i and the copy back of job i-1 overlap.
	Streams int
	// ArenaBytes is each lane's device input buffer (default a quarter of
	// the device's memory split over the lanes, at most 16 GiB). A snapshot
	// that fits is resident; a larger one streams through two windows of
	// half the arena each (rel then reads it twice: range, then encode).
	ArenaBytes uint64
	// JobTiles is the tiles per kernel job (default 2048 = 8 Mi values).
	JobTiles uint64
	// StageBytes is each lane's pinned staging ring for sources that are
	// not page-locked, in 4 slots (default 128 MiB).
	StageBytes uint64
	// CopyThreads is how many goroutines fill one staging slot (default 4:
	// one core copies ~10 GB/s, the PCIe link takes ~55).
	CopyThreads int
	// DeviceLanes and DeviceJobTiles shape the lanes that compress
	// GPU-resident snapshots (CompressDevice), apart from the lanes above:
	// such a snapshot needs no arena, no staging and no upload, so its
	// lanes are bounded by other things (deviceLaneConfig says which and
	// picks both when 0). They are allocated at the first device snapshot.
	DeviceLanes    int
	DeviceJobTiles uint64
}

// Source is a snapshot in host memory.
type Source struct {
	Bytes []byte
	// Pinned says Bytes is page-locked (RegisterHost, or pinned memory):
	// the copy engine reads it in place. Otherwise it is copied through the
	// lane's pinned staging ring.
	Pinned bool
	// Copy, for unpinned sources, copies src (a part of Bytes) into dst;
	// it is where a caller guards reads of a mapping that a producer may
	// truncate (ingest.Mapping.CopyRange). nil means copy.
	Copy func(dst, src []byte) error
	// Out, if large enough, receives the blob: reusing a buffer spares the
	// zeroing and page faults of a fresh allocation (~30 MB per 256 MiB
	// snapshot, which cost more host time than the GPU work).
	Out []byte
	// OutPinned says Out is page-locked (AllocPinned): lanes that copy
	// back exact byte counts (FZ_GPU_EXACT=1) then copy each job's bytes
	// from the device straight to its place in Out, and the host copies
	// no compressed byte. Out is used only while it has room; the blob
	// returned is then Out itself, else a Go slice (compare the first
	// byte's address to know).
	OutPinned bool
	// Device, if not 0, is the snapshot's address in this device's memory
	// (DeviceBytes bytes; Bytes is then unused): the kernels read it in
	// place and nothing is uploaded (GPU-resident snapshots, ipc.go).
	Device      uintptr
	DeviceBytes uint64
	// GPUTime, if not nil, receives the span of this snapshot's device
	// work (first kernel to last copy back), timed with CUDA events.
	GPUTime *time.Duration
}

// size is the snapshot's byte count.
func (src *Source) size() uint64 {
	if src.Device != 0 {
		return src.DeviceBytes
	}
	return uint64(len(src.Bytes))
}

// Streamer compresses snapshots on one GPU from host memory, overlapping
// host-to-device copies, kernels and device-to-host copies over several
// CUDA streams. Every device and pinned buffer is allocated by
// NewStreamer; Compress allocates only the output blob. The bytes equal
// fz.Compress's.
type Streamer struct {
	lib   *library
	dev   int32
	name  string
	o     StreamOptions
	lanes chan *lane
	all   []*lane
	// up is the device's one upload stream: every lane's host-to-device
	// copies queue on it in order, so the link serves one snapshot at a
	// time at full rate and each lane's kernels and host-side tail overlap
	// the next lane's copy. Copies issued on the lanes' own streams share
	// the link instead: all lanes finish uploading late and together, then
	// leave it idle while they all compute.
	up   uintptr
	upMu sync.Mutex
	// trRef (trace only): an event on the upload stream before its first
	// traced copy, so the trace can place every upload on one time line
	trRef uintptr
	// ipc caches other processes' device memory and events (ipc.go)
	ipc ipcCache
	// turns order the device lanes' kernels (gather.go)
	turns deviceTurns
	mem   uint64 // device memory (deviceLaneConfig)
	// dl: the lanes of GPU-resident snapshots, made at the first one
	dl struct {
		mu    sync.Mutex
		made  bool
		err   error
		lanes chan *lane
		tiles uint64
	}
}

type lane struct {
	s  *Streamer
	id int // index in Streamer.all (trace)
	// jobTiles: tiles per job (the contexts' capacity); exact: the lane
	// has no pinned output slots (a device lane made with FZ_GPU_EXACT=1),
	// so it copies each job back once its byte count is known, exactly
	// those bytes, into the blob (copyBackExact)
	jobTiles uint64
	exact    bool
	upEv     uintptr // event: this lane's last copy on the upload stream
	// trace: timing events around the lane's last shared upload
	upT0, upT1 uintptr
	upBytes    uint64
	// gt0, gt1 time a snapshot's device work (Source.GPUTime)
	gt0, gt1 uintptr
	arena    uintptr
	arenaCap uint64
	sl       []*slot
	stage    []*stageSlot
	next     int // next staging slot
	// perTile: compressed bytes per tile of the last job collected, the
	// basis of the next jobs' copy-back estimate (0: none yet)
	perTile float64
	// gather: a device lane that assembles GPU-resident snapshots on the
	// device (gather.go), in g
	gather bool
	g      gatherBufs
}

// slot is one CUDA stream of a lane and what a job on it needs.
type slot struct {
	stream uintptr
	ctx    uintptr
	dOut   uintptr
	hOut   unsafe.Pointer
	outCap uint64
	res    unsafe.Pointer
	copied uintptr // event: this stream's last input copy
	done   uintptr // event: this stream's last job
}

type stageSlot struct {
	buf  unsafe.Pointer
	size uint64
	ev   uintptr
	used bool
}

const stageSlots = 4

// trace (FZ_GPU_TRACE=1) prints each snapshot's host-side phases.
var trace = os.Getenv("FZ_GPU_TRACE") != ""

// traceEpoch is the origin of the trace's host times.
var traceEpoch = time.Now()

// laneUpload (FZ_GPU_UPLOAD=lane) issues uploads on the lanes' own streams
// instead of the device's upload stream; kept to compare the two.
var laneUpload = os.Getenv("FZ_GPU_UPLOAD") == "lane"

// serialAppend (FZ_GPU_APPEND=serial) appends each job's bytes to the blob
// on one thread instead of CopyThreads; kept to compare the two.
var serialAppend = os.Getenv("FZ_GPU_APPEND") == "serial"

// exactCopyBack (FZ_GPU_EXACT=1) makes lanes copy back each job's exact
// byte count once it is known, into a pinned blob where the caller gives
// one (Source.OutPinned; pipeline.GPU does), instead of an estimate into
// the slot's pinned buffer that the host then appends. It removes the
// host's copy of the compressed bytes (12 -> 0.2 ms per 1 GiB device
// snapshot on an H100 host) but puts a host round trip between each job's
// kernels and its copy back. Measured on one H100 (docs/PIPELINE.md):
// device snapshots 204-233 GB/s against 232 with estimates on 4 lanes of
// 2048 tiles and 283 on 8 of 8192 (same call): the copy back waits for
// the host to see each job done; C producers writing in place
// 0.75-0.83x pinned H2D against 0.72-0.77 in 3 pairs of runs, within the
// runs' spread. Not the default: kept to compare.
var exactCopyBack = os.Getenv("FZ_GPU_EXACT") == "1"

// ExactCopyBack says lanes copy back exact byte counts
// (FZ_GPU_EXACT=1): their callers may then give pinned blobs (OutPinned).
func ExactCopyBack() bool { return exactCopyBack }

// pinnedSlot allocates a lane's pinned output slot; device lanes that copy
// back exact counts or assemble snapshots on the device have none (they
// copy into the blob).
func pinnedSlot(l *library, device, exact bool, n uint64, p *unsafe.Pointer) int32 {
	if device && (exact || GatherDevice()) {
		return 0
	}
	return l.hostAlloc(n, p)
}

// Device lanes: a GPU-resident snapshot needs no upload, so what bounds
// them is the GPU and each snapshot's serial part. They assemble each
// snapshot on the device (gather.go), take turns for their kernels, and
// by default run one job per snapshot of up to 64 Ki tiles (1 GiB of f32)
// on one stream each: the kernels then run as `fzsidecar bench` runs them,
// one field after another, while the lanes' copies back and host parts
// overlap. Measured on one H100 (docs/PIPELINE.md, 1 GiB smooth3d
// snapshots at rel 1e-3, container version 2, one call): 4 lanes x 65536
// tiles x 1 stream 675 GB/s (0.60x kernel-only), 4 x 32768 x 2 streams
// 627, 6 x 65536 x 1 744; without turns 501-506; before device assembly
// (8 x 8192 x 3 streams, host appends and checksums) 385. Memory: no
// arena; per lane and stream a device output slot of compressBound(f64)
// and a codec context; per lane the snapshot buffer (an eighth of the
// snapshot at first): 15.9 GB of device memory for 4 lanes of 64 Ki tiles,
// no pinned slots (the blobs are pinned, pipeline/pinnedblobs.go).
const (
	deviceLanesDefault  = 4
	deviceJobTilesMax   = 65536
	deviceJobTilesMin   = 2048
	deviceStreamsGather = 1
	// boundPerTileF64 is fzgpu_compress_bound(f64, 1): a job's worst-case
	// output per tile (its device output slot).
	boundPerTileF64 = 58456
	// ctxScratch is a codec context's scratch at most (the warp encoder's
	// resident warps, 130 MiB on a 132-SM H200; fzgpu.h) plus 44 bytes a tile.
	ctxScratch = 130 << 20
)

// deviceLaneConfig picks the lanes and job tiles of GPU-resident snapshots
// on a device with mem bytes of memory: the given values where set (>0),
// else 4 lanes and the largest job of 65536 down to 2048 tiles whose lanes'
// device memory fits in a fifth of the device (the rest stays with the
// simulation that shares the GPU and the host lanes' arenas): 4 x 65536 on
// an 80 GB H100 or a 141 GB H200, 4 x 16384 on 40 GB. An explicitly set job
// size wins over the memory rule, and lanes shrink (to at least 2) before
// jobs go under 2048 tiles.
func deviceLaneConfig(mem uint64, streams, lanes int, tiles uint64) (int, uint64) {
	perLane := func(t uint64) uint64 { return uint64(streams) * (boundPerTileF64*t + 44*t + ctxScratch) }
	budget := mem / 5
	if tiles == 0 {
		n := lanes
		if n <= 0 {
			n = deviceLanesDefault
		}
		tiles = deviceJobTilesMax
		for tiles > deviceJobTilesMin && uint64(n)*perLane(tiles) > budget {
			tiles /= 2
		}
	}
	if lanes <= 0 {
		lanes = deviceLanesDefault
		for lanes > 2 && uint64(lanes)*perLane(tiles) > budget {
			lanes--
		}
	}
	return lanes, tiles
}

// envDeviceLanes (FZ_GPU_DEVICE_LANES) and envDeviceJobTiles
// (FZ_GPU_DEVICE_JOB_TILES) override the device lanes' defaults (comparisons).
func envDeviceLanes() int {
	v, _ := strconv.Atoi(os.Getenv("FZ_GPU_DEVICE_LANES"))
	return v
}

func envDeviceJobTiles() uint64 {
	v, _ := strconv.ParseUint(os.Getenv("FZ_GPU_DEVICE_JOB_TILES"), 10, 64)
	return v
}

// deviceLanes returns the pool of device lanes and their job tiles,
// making them at the first call. Where they cannot be allocated (device
// memory taken by the simulation) device snapshots use the host lanes,
// and DeviceLanes reports why.
func (s *Streamer) deviceLanes() (chan *lane, uint64) {
	d := &s.dl
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made {
		d.made = true
		n, tiles := s.deviceLaneConfig()
		var made []*lane
		for i := 0; i < n; i++ {
			ln, err := s.makeLane(tiles, exactCopyBack, true)
			if ln != nil {
				made = append(made, ln)
			}
			if err != nil {
				// Likely device memory taken by the simulation: give back
				// what was made, and use the host lanes.
				d.err = fmt.Errorf("GPU %d: %d device lanes of %d-tile jobs: %w", s.dev, n, tiles, err)
				for _, m := range made {
					s.freeLane(m)
				}
				break
			}
		}
		if d.err == nil {
			d.lanes, d.tiles = make(chan *lane, n), tiles
			for _, ln := range made {
				ln.id = len(s.all)
				s.all = append(s.all, ln)
				d.lanes <- ln
			}
		}
	}
	if d.lanes == nil {
		return s.lanes, s.o.JobTiles
	}
	return d.lanes, d.tiles
}

// DeviceLaneCount is how many lanes GPU-resident snapshots get on this
// device (deviceLaneConfig), known before they are allocated: callers
// size their concurrency from it (pipeline.GPU.Lanes).
func (s *Streamer) DeviceLaneCount() int {
	n, _ := s.deviceLaneConfig()
	return n
}

func (s *Streamer) deviceLaneConfig() (int, uint64) {
	return deviceLaneConfig(s.mem, s.deviceStreams(), cmpInt(s.o.DeviceLanes, envDeviceLanes()), cmpU64(s.o.DeviceJobTiles, envDeviceJobTiles()))
}

// deviceStreams is the streams per device lane: 1 where the lanes assemble
// snapshots on the device (a snapshot is one job of up to 64 Ki tiles; two
// jobs of 32 Ki on two streams ran side by side, 0.93x as fast: see the
// device lanes above), else the host lanes' count; FZ_GPU_DEVICE_STREAMS
// overrides it (comparisons).
func (s *Streamer) deviceStreams() int {
	if v, _ := strconv.Atoi(os.Getenv("FZ_GPU_DEVICE_STREAMS")); v > 0 {
		return v
	}
	if GatherDevice() {
		return deviceStreamsGather
	}
	return s.o.Streams
}

// DeviceLanes says how many lanes and tiles per job GPU-resident snapshots
// use, once the first has run (0 before), and why they fell back to the
// host lanes if they did.
func (s *Streamer) DeviceLanes() (lanes int, jobTiles uint64, err error) {
	d := &s.dl
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lanes != nil {
		return cap(d.lanes), d.tiles, nil
	}
	if d.made {
		return s.o.Lanes, s.o.JobTiles, d.err
	}
	return 0, 0, nil
}

func cmpInt(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

func cmpU64(a, b uint64) uint64 {
	if a > 0 {
		return a
	}
	return b
}

// envJobTiles (FZ_GPU_JOB_TILES) and envStreams (FZ_GPU_STREAMS) override
// the default tiles per job and streams per lane (comparisons).
func envJobTiles() uint64 {
	v, _ := strconv.ParseUint(os.Getenv("FZ_GPU_JOB_TILES"), 10, 64)
	return v
}

func envStreams() int {
	v, _ := strconv.Atoi(os.Getenv("FZ_GPU_STREAMS"))
	return v
}

// NewStreamer allocates everything a device needs to compress snapshots.
func NewStreamer(dev int, o StreamOptions) (*Streamer, error) {
	l, name, mem, err := openDevice(dev)
	if err != nil {
		return nil, err
	}
	if o.Lanes <= 0 {
		o.Lanes = 4
	}
	if o.Streams <= 0 {
		o.Streams = envStreams()
	}
	if o.Streams <= 0 {
		o.Streams = 3
	}
	if o.JobTiles == 0 {
		o.JobTiles = envJobTiles()
	}
	if o.JobTiles == 0 {
		o.JobTiles = 2048
	}
	if o.ArenaBytes == 0 {
		o.ArenaBytes = min(mem/4/uint64(o.Lanes), 16<<30)
	}
	o.ArenaBytes &^= 255
	if o.ArenaBytes < 1<<20 {
		return nil, fmt.Errorf("GPU arena of %d bytes: expected at least 1 MiB", o.ArenaBytes)
	}
	if o.StageBytes == 0 {
		o.StageBytes = 128 << 20
	}
	if o.CopyThreads <= 0 {
		o.CopyThreads = 4
	}
	s := &Streamer{lib: l, dev: int32(dev), o: o, lanes: make(chan *lane, o.Lanes), mem: mem,
		name: fmt.Sprintf("gpu %d (%s, %.0f GiB)", dev, name, float64(mem)/(1<<30))}
	if err := l.cerr(l.streamCreate(s.dev, &s.up), "create upload stream"); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", dev, err)
	}
	for i := 0; i < o.Lanes; i++ {
		ln, err := s.makeLane(o.JobTiles, false, false)
		if ln != nil {
			s.all = append(s.all, ln)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("GPU %d: %w", dev, err)
		}
		s.lanes <- ln
	}
	return s, nil
}

// makeLane allocates a lane. A device lane (GPU-resident snapshots) has
// no arena and no staging ring: its kernels read the producer's memory;
// with exact copy-back it has no pinned output slots either.
func (s *Streamer) makeLane(jobTiles uint64, exact, device bool) (*lane, error) {
	l, dev := s.lib, s.dev
	ln := &lane{s: s, id: len(s.all), jobTiles: jobTiles, exact: exact, gather: device && !exact && GatherDevice()}
	if !device {
		ln.arenaCap = s.o.ArenaBytes
		if err := l.cerr(l.malloc(dev, ln.arenaCap, &ln.arena), fmt.Sprintf("allocate a %d-byte arena", ln.arenaCap)); err != nil {
			return ln, err
		}
	}
	if err := l.cerr(l.eventBlocking(dev, &ln.upEv), "create event"); err != nil {
		return ln, err
	}
	if err := l.cerr(l.eventCreate(dev, &ln.gt0), "create event"); err != nil {
		return ln, err
	}
	if err := l.cerr(l.eventCreate(dev, &ln.gt1), "create event"); err != nil {
		return ln, err
	}
	if trace {
		if err := l.cerr(l.eventCreate(dev, &ln.upT0), "create event"); err != nil {
			return ln, err
		}
		if err := l.cerr(l.eventCreate(dev, &ln.upT1), "create event"); err != nil {
			return ln, err
		}
	}
	outCap := l.compressBound(2, jobTiles)
	streams := s.o.Streams
	if device {
		streams = s.deviceStreams()
	}
	for i := 0; i < streams; i++ {
		sl := &slot{outCap: outCap}
		ln.sl = append(ln.sl, sl)
		for _, step := range []struct {
			rc   int32
			what string
		}{
			// The lowest priority: a simulation's kernels on the same GPU
			// go first (GPU-resident snapshots, ipc.go).
			{l.ipc.streamPriority(dev, 1, &sl.stream, nil), "create stream"},
			{l.create(dev, jobTiles, &sl.ctx), "create GPU context"},
			{l.malloc(dev, outCap, &sl.dOut), "allocate output slot"},
			{pinnedSlot(l, device, exact, outCap, &sl.hOut), "allocate pinned output slot"},
			{l.hostAlloc(uint64(unsafe.Sizeof(result{})), &sl.res), "allocate pinned result"},
			{l.eventBlocking(dev, &sl.copied), "create event"},
			{l.eventBlocking(dev, &sl.done), "create event"},
		} {
			if err := l.cerr(step.rc, step.what); err != nil {
				return ln, err
			}
		}
	}
	if device {
		return ln, nil
	}
	per := max(s.o.StageBytes/stageSlots, 1<<20) &^ 4095
	for i := 0; i < stageSlots; i++ {
		ss := &stageSlot{size: per}
		ln.stage = append(ln.stage, ss)
		if err := l.cerr(l.hostAlloc(per, &ss.buf), "allocate pinned staging"); err != nil {
			return ln, err
		}
		if err := l.cerr(l.eventBlocking(dev, &ss.ev), "create event"); err != nil {
			return ln, err
		}
	}
	return ln, nil
}

// Name says which device this is.
func (s *Streamer) Name() string { return s.name }

// Device is the CUDA device index.
func (s *Streamer) Device() int { return int(s.dev) }

// Lanes is how many snapshots the device compresses at once.
func (s *Streamer) Lanes() int { return s.o.Lanes }

// Close frees everything; no Compress may be running.
func (s *Streamer) Close() error {
	l, dev := s.lib, s.dev
	for _, ln := range s.all {
		s.freeLane(ln)
	}
	s.all = nil
	s.ipc.close(s)
	if s.up != 0 {
		l.streamSync(dev, s.up)
		l.streamDestroy(dev, s.up)
		s.up = 0
	}
	if s.trRef != 0 {
		l.eventDestroy(dev, s.trRef)
		s.trRef = 0
	}
	return nil
}

// freeLane frees what a lane holds (also one makeLane left half made).
func (s *Streamer) freeLane(ln *lane) {
	l, dev := s.lib, s.dev
	for _, sl := range ln.sl {
		if sl.stream != 0 {
			l.streamSync(dev, sl.stream)
			l.streamDestroy(dev, sl.stream)
		}
		if sl.ctx != 0 {
			l.destroy(sl.ctx)
		}
		if sl.dOut != 0 {
			l.free(dev, sl.dOut)
		}
		for _, p := range []unsafe.Pointer{sl.hOut, sl.res} {
			if p != nil {
				l.hostFree(p)
			}
		}
		for _, e := range []uintptr{sl.copied, sl.done} {
			if e != 0 {
				l.eventDestroy(dev, e)
			}
		}
	}
	for _, ss := range ln.stage {
		if ss.buf != nil {
			l.hostFree(ss.buf)
		}
		if ss.ev != 0 {
			l.eventDestroy(dev, ss.ev)
		}
	}
	if ln.arena != 0 {
		l.free(dev, ln.arena)
	}
	ln.g.free(l, dev)
	for _, e := range []uintptr{ln.upEv, ln.upT0, ln.upT1, ln.gt0, ln.gt1} {
		if e != 0 {
			l.eventDestroy(dev, e)
		}
	}
}

// RegisterHost page-locks b, read-only, for every device (cudaHostRegister
// with the portable and read-only flags), so copies read it in place.
func RegisterHost(b []byte) error {
	l, err := loadLibrary()
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	return l.cerr(l.hostRegisterRO(unsafe.Pointer(unsafe.SliceData(b)), uint64(len(b))), "register host memory")
}

// AllocPinned allocates n bytes of page-locked host memory (cudaHostAlloc,
// portable: every device's copy engine reaches it), e.g. blobs that device
// lanes write in place (Source.OutPinned). Free it with FreePinned; the Go
// collector never does.
func AllocPinned(n uint64) ([]byte, error) {
	l, err := loadLibrary()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("allocate 0 bytes of pinned memory: expected a size > 0")
	}
	var p unsafe.Pointer
	if err := l.cerr(l.hostAlloc(n, &p), fmt.Sprintf("allocate %d bytes of pinned memory", n)); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// FreePinned frees memory from AllocPinned (any slice of it that starts at
// its first byte).
func FreePinned(b []byte) error {
	l, err := loadLibrary()
	if err != nil {
		return err
	}
	if cap(b) == 0 {
		return nil
	}
	return l.cerr(l.hostFree(unsafe.Pointer(unsafe.SliceData(b))), "free pinned memory")
}

// UnregisterHost undoes RegisterHost.
func UnregisterHost(b []byte) error {
	l, err := loadLibrary()
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	return l.cerr(l.hostUnregister(unsafe.Pointer(unsafe.SliceData(b))), "unregister host memory")
}

// Compress encodes src on this device; the bytes equal fz.Compress's. A
// device source (Source.Device) runs on the device lanes.
func (s *Streamer) Compress(ctx context.Context, src Source, p fz.Params, opts ...fz.Option) ([]byte, fz.Stats, error) {
	pool, tiles := s.lanes, s.o.JobTiles
	if src.Device != 0 {
		pool, tiles = s.deviceLanes()
	}
	return s.compressOn(ctx, pool, tiles, src, p, opts...)
}

func (s *Streamer) compressOn(ctx context.Context, pool chan *lane, jobTiles uint64, src Source, p fz.Params, opts ...fz.Option) ([]byte, fz.Stats, error) {
	if err := p.Validate(int64(src.size())); err != nil {
		return nil, fz.Stats{}, err
	}
	set := fz.SettingsOf(opts...)
	ver, err := fz.FormatVersionOf(opts...)
	if err != nil {
		return nil, fz.Stats{}, err
	}
	g, err := fz.PlanGeometryFor(p.DType, p.Dims, set.TilesPerChunk, set.Tiling)
	if err != nil {
		return nil, fz.Stats{}, err
	}
	if g.Elements == 0 || !onGPU(p.DType, g) {
		return fz.CPU().Compress(ctx, src.Bytes, p, opts...)
	}
	if g.TilesPerChunk > jobTiles {
		return nil, fz.Stats{}, fmt.Errorf("chunks of %d tiles exceed the GPU job of %d tiles", g.TilesPerChunk, jobTiles)
	}
	var ln *lane
	select {
	case ln = <-pool:
	case <-ctx.Done():
		return nil, fz.Stats{}, fmt.Errorf("compress: waiting for a GPU lane: %w", context.Cause(ctx))
	}
	defer func() { pool <- ln }()
	out, st, err := ln.compress(ctx, src, p, g, ver, set)
	if errors.Is(err, errBoundOnHost) {
		// Redo it on the CPU, from a private copy made as the device's
		// uploads are (Bytes may map a producer's segment: Source.Copy).
		buf := make([]byte, src.size())
		if src.Device != 0 {
			if err := s.copyFromDevice(buf, src.Device); err != nil {
				return nil, fz.Stats{}, err
			}
		} else if src.Copy != nil {
			if err := src.Copy(buf, src.Bytes); err != nil {
				return nil, fz.Stats{}, err
			}
		} else {
			copy(buf, src.Bytes)
		}
		return fz.CPU().Compress(ctx, buf, p, opts...)
	}
	return out, st, err
}

// job is a run of whole chunks and the elements its tiles read.
type job struct {
	first, n uint64 // chunks
	lo, hi   uint64 // bytes of the field
	back     uint64 // bytes copied back with the job (copyBackEstimate)
}

// jobSpan is the element range [lo, hi) the tiles of chunks [first,
// first+n) read. Tiles are in C order over the tile grid, so the first
// tile's origin is the lowest element and the last tile's far corner the
// highest.
func jobSpan(g fz.Geometry, first, n uint64) (lo, hi uint64) {
	tz, ty, tx := uint64(g.Tile[0]), uint64(g.Tile[1]), uint64(g.Tile[2])
	gx, gy := (g.NX+tx-1)/tx, (g.NY+ty-1)/ty
	t0, _ := g.ChunkTiles(first)
	_, t1 := g.ChunkTiles(first + n - 1)
	if g.Flat { // flat tiles (docs/FORMAT.md 3.1): tile t is values 4096t .. 4096t + 4095
		return t0 * fz.TileElems, min(g.Elements, t1*fz.TileElems)
	}
	t1--
	ix, iy, iz := t0%gx, (t0/gx)%gy, t0/(gx*gy)
	lo = (iz*tz*g.NY+iy*ty)*g.NX + ix*tx
	ix, iy, iz = t1%gx, (t1/gx)%gy, t1/(gx*gy)
	z, y, x := min(g.NZ, iz*tz+tz)-1, min(g.NY, iy*ty+ty)-1, min(g.NX, ix*tx+tx)-1
	return lo, (z*g.NY+y)*g.NX + x + 1
}

// run is one snapshot's state on a lane.
type run struct {
	ln   *lane
	ctx  context.Context
	src  Source
	f    field
	es   uint64
	jobs []job
	out  []byte // allocated at the first job, sized from its ratio
	// exact: copy back exact counts (copyBackExact), where the lane has
	// no pinned slots or FZ_GPU_EXACT=1 (read per snapshot, so tests can
	// compare both on one lane)
	exact bool
	// pinned: out is the caller's page-locked Out, written by the device
	// (exact runs); copies into it may still run until the lane's
	// streams are synchronized
	pinned bool
	// gather: the snapshot is assembled on the device (gather.go); gSum
	// sums the collected jobs' bytes, of which gOff went back early
	// (gEarly: into out, still going)
	gather     bool
	gEarly     bool
	gSum, gOff uint64
	hsz        uint64
	st         fz.Stats
	last       result
	issued     int // jobs enqueued
	done       int // jobs collected
	lastCpy    uintptr
	// windows: buffer w holds field bytes [wlo, copied) at its start
	buf     [2]uintptr
	bufCap  uint64
	cur     int
	wlo     uint64
	copied  uint64
	lastJob [2]int // last job index issued on each buffer (-1 none)
	// trace: host time waiting for jobs, appending their bytes; jobs whose
	// copy-back estimate fell short
	wJob, tApp time.Duration
	tIssue     time.Duration // trace: host time in issue
	shortBack  int
}

// ver is the container version written (1 or 2, fz.FormatVersionOf).
func (ln *lane) compress(ctx context.Context, src Source, p fz.Params, g fz.Geometry, ver uint16, set fz.Settings) (out []byte, st fz.Stats, err error) {
	s, l := ln.s, ln.s.lib
	t0 := time.Now()
	r := &run{ln: ln, ctx: ctx, src: src, es: uint64(p.DType.Size()), f: compressField(p, g, ver), lastJob: [2]int{-1, -1},
		exact: ln.exact || exactCopyBack}
	for _, j := range jobs(g, ln.jobTiles) {
		lo, hi := jobSpan(g, j[0], j[1])
		r.jobs = append(r.jobs, job{first: j[0], n: j[1], lo: lo * r.es, hi: hi * r.es})
	}
	N := src.size()
	resident := N <= ln.arenaCap || src.Device != 0
	switch {
	case src.Device != 0: // in place: every job's bytes are present
		r.buf[0], r.bufCap, r.copied = src.Device, N, N
	case resident:
		r.buf[0], r.bufCap = ln.arena, ln.arenaCap
	default:
		half := (ln.arenaCap / 2) &^ 255
		r.buf[0], r.buf[1], r.bufCap = ln.arena, ln.arena+uintptr(half), half
		for _, j := range r.jobs {
			if j.hi-j.lo > half {
				return nil, st, fmt.Errorf("a GPU job reads %d bytes (its tiles span whole planes of the field) but the arena's window holds %d: raise the GPU arena", j.hi-j.lo, half)
			}
		}
	}
	defer func() {
		if err != nil { // nothing may still be using the lane's buffers
			l.eventSync(s.dev, ln.upEv)
			for _, sl := range ln.sl {
				l.streamSync(s.dev, sl.stream)
			}
			if ln.g.cp != 0 { // copies back into the caller's blob
				l.streamSync(s.dev, ln.g.cp)
			}
			for _, ss := range ln.stage { // copies from it may sit on the upload stream
				if ss.used {
					l.eventSync(s.dev, ss.ev)
				}
				ss.used = false
			}
		}
	}()
	s0 := ln.sl[0]
	// A device lane's kernels run in turns (gather.go): held from here to
	// the last job's issue.
	turns, held := src.Device != 0 && ln.gather && !deviceTurnsOff, false
	takeTurn := func() error {
		if turns && !held {
			if err := s.turns.take(s, s0.stream); err != nil {
				return err
			}
			held = true
		}
		return nil
	}
	endTurn := func(stream uintptr) error {
		if !held {
			return nil
		}
		held = false
		return s.turns.done(s, stream)
	}
	defer func() {
		if held {
			s.turns.drop()
		}
	}()
	if err := takeTurn(); err != nil {
		return nil, st, err
	}
	if src.GPUTime != nil {
		if err := l.cerr(l.eventRecord(s.dev, ln.gt0, s0.stream), "record event"); err != nil {
			return nil, st, err
		}
	}
	// Parameters: the range needs every value before any tile is encoded.
	if p.Mode == fz.Rel {
		if src.Device != 0 {
			if err := l.cerr(l.rangeOf(s0.ctx, s0.stream, &r.f, src.Device, N/r.es, 0), "GPU range"); err != nil {
				return nil, st, err
			}
		} else if resident {
			if err := r.upload(ln.arena, src.Bytes, s0.stream, true); err != nil {
				return nil, st, err
			}
			r.copied = N
			if err := l.cerr(l.rangeOf(s0.ctx, s0.stream, &r.f, ln.arena, N/r.es, 0), "GPU range"); err != nil {
				return nil, st, err
			}
		} else {
			piece := ln.arenaCap / r.es * r.es
			for off := uint64(0); off < N; off += piece {
				n := min(piece, N-off)
				// On the lane's stream: the next piece overwrites what
				// this piece's range kernel reads.
				if err := r.upload(ln.arena, src.Bytes[off:off+n], s0.stream, false); err != nil {
					return nil, st, err
				}
				acc := int32(0)
				if off > 0 {
					acc = 1
				}
				if err := l.cerr(l.rangeOf(s0.ctx, s0.stream, &r.f, ln.arena, n/r.es, acc), "GPU range"); err != nil {
					return nil, st, err
				}
			}
		}
	}
	if err := l.cerr(l.prepareRange(s0.ctx, s0.stream, &r.f), "GPU parameters"); err != nil {
		return nil, st, err
	}
	if err := l.cerr(l.eventRecord(s.dev, s0.copied, s0.stream), "record event"); err != nil {
		return nil, st, err
	}
	r.lastCpy = s0.copied
	tParams := time.Now()
	for _, sl := range ln.sl[1:] {
		if err := l.cerr(l.streamWait(s.dev, sl.stream, s0.copied), "stream wait"); err != nil {
			return nil, st, err
		}
		if err := l.cerr(l.paramsCopy(sl.ctx, s0.ctx, sl.stream), "share GPU parameters"); err != nil {
			return nil, st, err
		}
	}
	r.hsz = headerSize(p, g)
	hsz := r.hsz
	S := len(ln.sl)
	var crcs []uint32 // the device's chunk checksums (gather)
	for attempt, need := 0, uint64(0); ; attempt++ {
		r.st, r.done, r.issued, r.last, r.gSum = fz.Stats{RawBytes: N}, 0, 0, result{}, 0
		if err := takeTurn(); err != nil { // a run again
			return nil, st, err
		}
		if src.Device != 0 && ln.gather {
			r.gather = true
			if err := r.gatherStart(N, g.Chunks, need); err != nil {
				// device memory taken (by the simulation): jobs copy back
				// one by one, into the blob
				if attempt > 0 {
					return nil, st, err
				}
				r.gather, r.exact = false, true
			}
		}
		for j := range r.jobs {
			if err := ctx.Err(); err != nil {
				return nil, st, fmt.Errorf("compress: %w", context.Cause(ctx))
			}
			if j >= S {
				if err := r.collectUpTo(j - S); err != nil {
					return nil, st, err
				}
			}
			ti := time.Now()
			if err := r.issue(j); err != nil {
				return nil, st, err
			}
			r.tIssue += time.Since(ti)
			if j == len(r.jobs)-1 {
				if err := endTurn(ln.sl[j%S].stream); err != nil {
					return nil, st, err
				}
			}
			if set.Progress != nil && j > 0 {
				set.Progress(r.jobs[r.done-1].hi, N)
			}
		}
		if err := r.collectUpTo(len(r.jobs) - 1); err != nil {
			return nil, st, err
		}
		if !r.gather {
			break
		}
		var err error
		crcs, err = r.gatherFinish(g.Chunks)
		var room errGatherRoom
		if errors.As(err, &room) && attempt == 0 {
			need = room.need // once more, into a buffer of that size
			ln.g.redos++
			continue
		}
		if err != nil {
			return nil, st, err
		}
		break
	}
	if r.exact { // the last copies back into out may still run
		for _, sl := range ln.sl {
			if err := l.cerr(l.eventRecord(s.dev, sl.done, sl.stream), "record event"); err != nil {
				return nil, st, err
			}
			if err := l.cerr(l.eventSync(s.dev, sl.done), "copy from GPU"); err != nil {
				return nil, st, err
			}
		}
	}
	if r.out == nil {
		r.out = make([]byte, hsz)
	}
	if src.GPUTime != nil {
		if err := ln.gpuSpan(src.GPUTime); err != nil {
			return nil, st, err
		}
	}
	tJobs := time.Now()
	if set.Progress != nil {
		set.Progress(N, N)
	}
	res := r.last
	if err := finishContainer(p, g, ver, res, r.out, hsz, set.Workers, crcs, &r.st); err != nil {
		return nil, st, err
	}
	if trace {
		now := time.Now()
		ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 }
		// The lane's last shared upload (a rel snapshot's only one): on the
		// FIFO upload stream its events bracket the transfer itself.
		var upMs float32
		if ln.upT1 != 0 && ln.upBytes > 0 {
			var atMs float32
			l.eventElapsed(s.dev, ln.upT0, ln.upT1, &upMs)
			l.eventElapsed(s.dev, s.trRef, ln.upT0, &atMs)
			fmt.Fprintf(os.Stderr, "fzgpu trace dev %d: upload %d MB %.2fms = %.1f GB/s at %.3fms\n", s.dev, ln.upBytes>>20, upMs, float64(ln.upBytes)/float64(upMs)/1e6, atMs)
			ln.upBytes = 0
		}
		at := func(t time.Time) float64 { return ms(t.Sub(traceEpoch)) }
		fmt.Fprintf(os.Stderr, "fzgpu trace dev %d lane %d: host start %.3fms params %.3fms end %.3fms\n", s.dev, ln.id, at(t0), at(tParams), at(now))
		fmt.Fprintf(os.Stderr, "fzgpu trace dev %d: %d MB %s resident=%v pinned=%v jobs=%d: params %.2fms jobs %.2fms waitjob %.2fms append %.2fms index %.2fms total %.2fms short-copy-backs %d issue %.2fms\n",
			s.dev, N>>20, p.Mode, resident, src.Pinned, len(r.jobs), ms(tParams.Sub(t0)), ms(tJobs.Sub(tParams)),
			ms(r.wJob), ms(r.tApp), ms(now.Sub(tJobs)), ms(now.Sub(t0)), r.shortBack, ms(r.tIssue))
	}
	return r.out, r.st, nil
}

// issue enqueues job j on stream j%S: the input bytes it still lacks, then
// the kernels.
func (r *run) issue(j int) error {
	ln := r.ln
	s, l := ln.s, ln.s.lib
	sl := ln.sl[j%len(ln.sl)]
	jb := r.jobs[j]
	if jb.hi-r.wlo > r.bufCap { // slide to the other window, keeping what this job still needs
		nb := 1 - r.cur
		if err := r.collectUpTo(r.lastJob[nb]); err != nil {
			return err
		}
		if err := l.cerr(l.streamWait(s.dev, sl.stream, r.lastCpy), "stream wait"); err != nil {
			return err
		}
		if keep := r.copied - min(r.copied, jb.lo); keep > 0 {
			from := r.buf[r.cur] + uintptr(jb.lo-r.wlo)
			if err := l.cerr(l.copyD2D(s.dev, r.buf[nb], from, keep, 3, sl.stream), "GPU window copy"); err != nil {
				return err
			}
		} else {
			r.copied = jb.lo
		}
		r.cur, r.wlo = nb, jb.lo
	}
	buf := r.buf[r.cur]
	if r.lastCpy != 0 && r.lastCpy != sl.copied {
		if err := l.cerr(l.streamWait(s.dev, sl.stream, r.lastCpy), "stream wait"); err != nil {
			return err
		}
	}
	if jb.hi > r.copied {
		// A window reuses device memory that earlier kernels of this
		// snapshot (range pass, earlier jobs) read: only the lane's
		// streams order the copy after them.
		if err := r.upload(buf+uintptr(r.copied-r.wlo), r.src.Bytes[r.copied:jb.hi], sl.stream, r.buf[1] == 0); err != nil {
			return err
		}
		r.copied = jb.hi
	}
	if err := l.cerr(l.eventRecord(s.dev, sl.copied, sl.stream), "record event"); err != nil {
		return err
	}
	r.lastCpy = sl.copied
	if err := l.cerr(l.compressAt(sl.ctx, sl.stream, &r.f, buf, r.wlo/r.es, jb.first, jb.n, sl.dOut, sl.outCap, sl.res), "GPU compress"); err != nil {
		return err
	}
	// The job's byte count is only known on the device: copy back an
	// estimate now and the rest, if any, when the job is collected (exact
	// lanes copy when it is collected, see copyBackExact).
	if r.gather {
		if err := r.gatherJob(j, sl); err != nil {
			return err
		}
	} else if !r.exact {
		r.jobs[j].back = ln.copyBackEstimate(jb.n, sl.outCap)
		if err := l.cerr(l.copyD2H(s.dev, sl.hOut, sl.dOut, r.jobs[j].back, 2, sl.stream), "copy from GPU"); err != nil {
			return err
		}
	}
	if err := l.cerr(l.eventRecord(s.dev, sl.done, sl.stream), "record event"); err != nil {
		return err
	}
	r.lastJob[r.cur] = j
	r.issued = j + 1
	return nil
}

// copyBackEstimate is how many bytes of a job of n tiles to copy back
// with it, before its size is known: the last job's bytes per tile plus a
// quarter and 64 KiB, or the whole slot for a lane's first job. A short
// estimate costs a second, synchronous copy at collection; a long one only
// idle device-to-host bandwidth. A copy engine does this rather than a
// kernel writing into mapped host memory: measured on an H200
// (cuda/tools/loadprobe.cu), such a kernel's PCIe writes slow concurrent
// uploads from 55.4 to 51.8 GB/s, a cudaMemcpyAsync of the same bytes to
// 55.1.
func (ln *lane) copyBackEstimate(n, slotCap uint64) uint64 {
	if ln.perTile == 0 {
		return slotCap
	}
	est := uint64(ln.perTile*1.25*float64(n)) + 64<<10
	return min(slotCap, (est+4095)&^4095)
}

// collectUpTo waits for jobs up to k (in order) and appends their bytes.
func (r *run) collectUpTo(k int) error {
	ln := r.ln
	s, l := ln.s, ln.s.lib
	for ; r.done <= k && r.done < r.issued; r.done++ {
		sl := ln.sl[r.done%len(ln.sl)]
		t0 := time.Now()
		if err := l.cerr(l.eventSync(s.dev, sl.done), "GPU compress"); err != nil {
			return err
		}
		t1 := time.Now()
		r.wJob += t1.Sub(t0)
		res := *(*result)(sl.res)
		if res.status != 0 {
			return l.cerr(int32(res.status), "GPU compress")
		}
		if res.bytes > sl.outCap {
			return fmt.Errorf("GPU compress: job reports %d bytes, its slot holds %d", res.bytes, sl.outCap)
		}
		if r.gather { // the bytes are on the device, in place: copy them back
			if err := r.gatherCopy(res.bytes); err != nil {
				return err
			}
			r.gSum += res.bytes
			r.st.Outliers += res.outliers
			r.st.MaxAbsErr = max(r.st.MaxAbsErr, res.maxAbsErr)
			r.last = res
			continue
		}
		if r.exact {
			if err := r.copyBackExact(sl, res.bytes); err != nil {
				return err
			}
			r.st.Outliers += res.outliers
			r.st.MaxAbsErr = max(r.st.MaxAbsErr, res.maxAbsErr)
			r.last = res
			continue
		}
		if back := r.jobs[r.done].back; res.bytes > back { // the estimate fell short
			if err := l.cerr(l.copyD2H(s.dev, unsafe.Add(sl.hOut, back), sl.dOut+uintptr(back), res.bytes-back, 2, sl.stream), "copy from GPU"); err != nil {
				return err
			}
			if err := l.cerr(l.streamSync(s.dev, sl.stream), "copy from GPU"); err != nil {
				return err
			}
			r.shortBack++
		}
		ln.perTile = float64(res.bytes) / float64(r.jobs[r.done].n)
		if res.bytes > 0 {
			t2 := time.Now()
			if r.out == nil {
				r.startOut(res.bytes, false)
			}
			job := unsafe.Slice((*byte)(sl.hOut), res.bytes)
			if serialAppend || len(job) < 1<<20 {
				r.out = append(r.out, job...)
			} else { // one core copies ~10 GB/s: several share a job's megabytes
				n0 := len(r.out)
				r.out = slices.Grow(r.out, len(job))[:n0+len(job)]
				parallelCopy(r.out[n0:], job, s.o.CopyThreads, func(d, s []byte) error { copy(d, s); return nil })
			}
			r.tApp += time.Since(t2)
		}
		r.st.Outliers += res.outliers
		r.st.MaxAbsErr = max(r.st.MaxAbsErr, res.maxAbsErr)
		r.last = res
	}
	return nil
}

// startOut makes the blob at the first job that has bytes (n of them).
// Large Go allocations are zeroed and fault their pages in: size the blob
// from the first job's ratio (+25 %) rather than the raw size, and round
// up so a released blob fits the next snapshots of about the same ratio.
// With pinnedOK the caller's pinned Out is taken if the first job fits.
func (r *run) startOut(n uint64, pinnedOK bool) {
	jb := r.jobs[r.done]
	est := n * r.src.size() / max(jb.hi-jb.lo, 1)
	need := r.hsz + est + est/4 + 4096
	switch {
	case pinnedOK && r.src.OutPinned && uint64(cap(r.src.Out)) >= r.hsz+n:
		r.out, r.pinned = r.src.Out[:r.hsz], true
	case !r.src.OutPinned && uint64(cap(r.src.Out)) >= need:
		r.out = r.src.Out[:r.hsz]
	default:
		r.out = make([]byte, r.hsz, (need+need/4+(1<<20)-1)&^(1<<20-1))
		return
	}
	clear(r.out)
}

// copyBackExact copies a collected job's n bytes from its slot to the end
// of the blob. Into the caller's pinned Out the copy engine writes them in
// place, queued on the slot's stream (the slot's next job follows it; the
// lane synchronizes its streams before the blob is used): no host copy,
// no estimate's margin over the link. Where the pinned blob has no room
// left (or was not given), the rest goes to Go memory: through the slot's
// pinned buffer where the lane has one, else by a synchronous copy into
// pageable memory (slower; a pool of pinned blobs sized from earlier
// snapshots makes it rare).
func (r *run) copyBackExact(sl *slot, n uint64) error {
	if n == 0 {
		return nil
	}
	ln := r.ln
	s, l := ln.s, ln.s.lib
	t0 := time.Now()
	defer func() { r.tApp += time.Since(t0) }()
	if r.out == nil {
		r.startOut(n, true)
	}
	if r.pinned && uint64(cap(r.out)-len(r.out)) >= n {
		n0 := len(r.out)
		r.out = r.out[:n0+int(n)]
		return l.cerr(l.copyD2H(s.dev, unsafe.Pointer(&r.out[n0]), sl.dOut, n, 2, sl.stream), "copy from GPU")
	}
	if r.pinned { // out of room: wait for the copies into it, go on in Go memory
		for _, o := range ln.sl {
			if err := l.cerr(l.streamSync(s.dev, o.stream), "copy from GPU"); err != nil {
				return err
			}
		}
		est := (uint64(len(r.out)) + n) * r.src.size() / max(r.jobs[r.done].hi, 1)
		b := make([]byte, len(r.out), (est+est/4+(1<<20)-1)&^(1<<20-1))
		copy(b, r.out)
		r.out, r.pinned = b, false
	}
	n0 := len(r.out)
	r.out = slices.Grow(r.out, int(n))[:n0+int(n)]
	if sl.hOut != nil {
		if err := l.cerr(l.copyD2H(s.dev, sl.hOut, sl.dOut, n, 2, sl.stream), "copy from GPU"); err != nil {
			return err
		}
		if err := l.cerr(l.streamSync(s.dev, sl.stream), "copy from GPU"); err != nil {
			return err
		}
		return parallelCopy(r.out[n0:], unsafe.Slice((*byte)(sl.hOut), n), s.o.CopyThreads, func(d, s []byte) error { copy(d, s); return nil })
	}
	// Pageable memory: the copy returns once done.
	if err := l.cerr(l.copyD2H(s.dev, unsafe.Pointer(&r.out[n0]), sl.dOut, n, 2, sl.stream), "copy from GPU"); err != nil {
		return err
	}
	return l.cerr(l.streamSync(s.dev, sl.stream), "copy from GPU")
}

// upload copies src to device address dst and makes stream wait for it:
// straight from src if it is page-locked, else through the lane's pinned
// staging ring, each slot filled by CopyThreads goroutines. With shared the
// copies queue on the device's upload stream (see Streamer.up): only for
// destinations no kernel still reads, since the copy no longer follows
// stream's earlier work.
func (r *run) upload(dst uintptr, src []byte, stream uintptr, shared bool) error {
	ln := r.ln
	s, l := ln.s, ln.s.lib
	if len(src) == 0 {
		return nil
	}
	cs := stream
	if shared && !laneUpload {
		cs = s.up
	}
	if r.src.Pinned {
		copyIn := func() error {
			return l.cerr(l.copyH2DHost(s.dev, dst, uintptr(unsafe.Pointer(unsafe.SliceData(src))), uint64(len(src)), 1, cs), "copy to GPU")
		}
		if cs == stream {
			return copyIn()
		}
		s.upMu.Lock()
		if ln.upT0 != 0 {
			if s.trRef == 0 && l.eventCreate(s.dev, &s.trRef) == 0 {
				l.eventRecord(s.dev, s.trRef, cs)
			}
			l.eventRecord(s.dev, ln.upT0, cs)
		}
		err := copyIn()
		if err == nil {
			err = l.cerr(l.eventRecord(s.dev, ln.upEv, cs), "record event")
		}
		if ln.upT1 != 0 {
			l.eventRecord(s.dev, ln.upT1, cs)
			ln.upBytes = uint64(len(src))
		}
		s.upMu.Unlock()
		if err != nil {
			return err
		}
		return l.cerr(l.streamWait(s.dev, stream, ln.upEv), "stream wait")
	}
	cp := r.src.Copy
	if cp == nil {
		cp = func(d, s []byte) error { copy(d, s); return nil }
	}
	for off := uint64(0); off < uint64(len(src)); {
		ss := ln.stage[ln.next]
		ln.next = (ln.next + 1) % len(ln.stage)
		if ss.used {
			if err := l.cerr(l.eventSync(s.dev, ss.ev), "staging copy"); err != nil {
				return err
			}
		}
		n := min(ss.size, uint64(len(src))-off)
		if err := parallelCopy(unsafe.Slice((*byte)(ss.buf), n), src[off:off+n], s.o.CopyThreads, cp); err != nil {
			return err
		}
		if cs != stream {
			s.upMu.Lock()
		}
		err := l.cerr(l.copyH2D(s.dev, dst+uintptr(off), ss.buf, n, 1, cs), "copy to GPU")
		if err == nil {
			err = l.cerr(l.eventRecord(s.dev, ss.ev, cs), "record event")
		}
		if cs != stream {
			s.upMu.Unlock()
		}
		if err != nil {
			return err
		}
		ss.used = true
		off += n
	}
	if cs != stream {
		// The last slot's event follows every earlier piece on cs.
		return l.cerr(l.streamWait(s.dev, stream, ln.stage[(ln.next+len(ln.stage)-1)%len(ln.stage)].ev), "stream wait")
	}
	return nil
}

// parallelCopy splits one copy over up to threads goroutines in 64 KiB
// aligned parts and returns the first error.
func parallelCopy(dst, src []byte, threads int, cp func(d, s []byte) error) error {
	const align = 64 << 10
	n := uint64(len(src))
	per := (n/uint64(max(threads, 1)) + align - 1) / align * align
	if threads <= 1 || n < 2*align {
		return cp(dst, src)
	}
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for t := 0; t < threads; t++ {
		a := min(n, uint64(t)*per)
		b := min(n, a+per)
		if a == b {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[t] = cp(dst[a:b], src[a:b])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// PinnedH2D measures the host-to-device bandwidth from pinned memory on
// this device (bytes per second, median of reps after a warm-up), using a
// lane's arena as the target: it waits for a free lane.
func (s *Streamer) PinnedH2D(ctx context.Context, bytes uint64, reps int) (float64, error) {
	var ln *lane
	select {
	case ln = <-s.lanes:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	defer func() { s.lanes <- ln }()
	l, dev, st := s.lib, s.dev, ln.sl[0].stream
	bytes = min(bytes, ln.arenaCap)
	var hp unsafe.Pointer
	if err := l.cerr(l.hostAlloc(bytes, &hp), "pinned allocation"); err != nil {
		return 0, err
	}
	defer l.hostFree(hp)
	tm, err := newTimer(l, dev, st)
	if err != nil {
		return 0, err
	}
	defer tm.close()
	ms, err := tm.median(max(reps, 1), func() error { return l.cerr(l.copyH2D(dev, ln.arena, hp, bytes, 1, st), "H2D") })
	if err != nil {
		return 0, err
	}
	return float64(bytes) / (ms / 1e3), nil
}
