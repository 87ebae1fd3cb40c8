package cuda

import (
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"
)

// Device-assembled snapshots (device lanes, GPU-resident snapshots): each
// job's chunks are appended on the device to the lane's snapshot buffer,
// with their CRC32C (fzgpu_gather, gather.cuh). Once the host has seen a
// job done, one copy on the lane's copy stream takes exactly its bytes
// straight to their place in the output blob (a pinned one where the
// caller gives it); after the last job the host reads back the device's
// byte count and checksums and writes only the header and index. Before,
// the host copied every job's bytes from a pinned slot into the blob and
// checksummed every chunk: per 1 GiB snapshot 9-12 and 3-5 ms in each of 8
// lanes on an H100 host, which bounded device snapshots' ingest
// (docs/PIPELINE.md), and the lanes held 11.5 GB of pinned slots.
//
// The buffer's size is known only on the device: it starts at an eighth of
// the snapshot (and grows to a quarter more than the largest a snapshot
// needed); a snapshot that does not fit is compressed again into a buffer
// of the size the device counted (its source is in device memory, so
// nothing is lost; the jobs are deterministic).

// gatherOff (FZ_GPU_GATHER=0) turns device assembly off: device lanes then
// copy back an estimate per job and the host appends (kept to compare).
var gatherOff = os.Getenv("FZ_GPU_GATHER") == "0"

// GatherDevice says device lanes assemble snapshots on the device (unless
// FZ_GPU_GATHER=0, or FZ_GPU_EXACT=1 makes them copy back exact counts):
// callers of CompressDevice should give pinned blobs
// (DeviceSnapshot.OutPinned), which the copies back then fill in place.
func GatherDevice() bool { return !gatherOff && !exactCopyBack }

// gatherStateBytes: the device state before the chunk checksums (3 u64,
// padded to 32 bytes): bytes so far, did-not-fit flag, blocks done.
const gatherStateBytes = 32

// gatherBufs are a device lane's buffers for assembly.
type gatherBufs struct {
	// cp: the lane's copy-back stream (lowest priority), cpDone its last
	// copy: a job's bytes go back as soon as the host has seen it done,
	// while other jobs and lanes compute
	cp, cpDone uintptr
	snap       uintptr // the snapshot's chunks, back to back
	snapCap    uint64
	state      uintptr // gatherStateBytes, then a CRC32C per chunk
	hState     unsafe.Pointer
	stateCap   uint64
	// want: the snapshot buffer's size for the next snapshots (0: an
	// eighth of the snapshot)
	want uint64
	// redos: snapshots compressed again into a larger buffer (tests)
	redos int
}

func (gb *gatherBufs) free(l *library, dev int32) {
	if gb.cp != 0 {
		l.streamSync(dev, gb.cp)
		l.streamDestroy(dev, gb.cp)
	}
	if gb.cpDone != 0 {
		l.eventDestroy(dev, gb.cpDone)
	}
	if gb.snap != 0 {
		l.free(dev, gb.snap)
	}
	if gb.state != 0 {
		l.free(dev, gb.state)
	}
	if gb.hState != nil {
		l.hostFree(gb.hState)
	}
	*gb = gatherBufs{want: gb.want, redos: gb.redos}
}

// gatherStart sizes the lane's buffers for a snapshot of n bytes in
// chunks chunks (need: bytes its chunks are known to need, 0 if unknown)
// and zeroes the device state on the lane's first stream (the stream of
// the snapshot's first job). The lane's streams are idle.
func (r *run) gatherStart(n, chunks, need uint64) error {
	ln := r.ln
	s, l := ln.s, ln.s.lib
	gb := &ln.g
	if r.out != nil { // a run again: the first run's copies into the blob may still be going
		if err := l.cerr(l.streamSync(s.dev, gb.cp), "copy from GPU"); err != nil {
			return err
		}
		r.out, r.pinned = nil, false
	}
	r.gOff, r.gEarly = 0, false
	if gb.cp == 0 {
		if err := l.cerr(l.ipc.streamPriority(s.dev, 1, &gb.cp, nil), "create stream"); err != nil {
			gb.cp = 0
			return err
		}
		if err := l.cerr(l.eventBlocking(s.dev, &gb.cpDone), "create event"); err != nil {
			gb.cpDone = 0
			return err
		}
	}
	want := max(gb.want, need+need/4, n/8+(1<<20))
	want = (want + (1<<20 - 1)) &^ (1<<20 - 1)
	if gb.snapCap < want {
		if gb.snap != 0 {
			l.free(s.dev, gb.snap)
			gb.snap, gb.snapCap = 0, 0
		}
		if err := l.cerr(l.malloc(s.dev, want, &gb.snap), fmt.Sprintf("allocate a %d-byte snapshot buffer", want)); err != nil {
			gb.snap = 0
			return err
		}
		gb.snapCap = want
	}
	if st := gatherStateBytes + 4*chunks; gb.stateCap < st {
		st = (st + 4095) &^ 4095
		if gb.state != 0 {
			l.free(s.dev, gb.state)
			l.hostFree(gb.hState)
			gb.state, gb.hState, gb.stateCap = 0, nil, 0
		}
		if err := l.cerr(l.malloc(s.dev, st, &gb.state), "allocate gather state"); err != nil {
			gb.state = 0
			return err
		}
		if err := l.cerr(l.hostAlloc(st, &gb.hState), "allocate pinned gather state"); err != nil {
			gb.hState = nil
			return err
		}
		gb.stateCap = st
	}
	return l.cerr(l.memsetAsync(s.dev, gb.state, 0, gatherStateBytes, ln.sl[0].stream), "clear gather state")
}

// gatherJob appends job j (just issued on slot sl) to the snapshot buffer,
// after job j-1's (whose slot's done event was recorded after its gather).
func (r *run) gatherJob(j int, sl *slot) error {
	ln := r.ln
	s, l := ln.s, ln.s.lib
	if j > 0 {
		prev := ln.sl[(j-1)%len(ln.sl)]
		if prev != sl {
			if err := l.cerr(l.streamWait(s.dev, sl.stream, prev.done), "stream wait"); err != nil {
				return err
			}
		}
	}
	jb := r.jobs[j]
	gb := &ln.g
	return l.cerr(l.gather(sl.ctx, sl.stream, &r.f, jb.first, jb.n, sl.dOut, sl.outCap, gb.snap, gb.snapCap,
		gb.state, gb.state+gatherStateBytes), "GPU gather")
}

// gatherCopy copies a collected job's n bytes back, from where the device
// put them (r.gOff on), to their place in the blob: a pinned one given by
// the caller, chosen at the first job (if it holds the first job's bytes),
// on the lane's copy stream. Where the blob has no room left, the copies
// stop and gatherFinish takes the rest.
func (r *run) gatherCopy(n uint64) error {
	ln := r.ln
	s, l := ln.s, ln.s.lib
	gb := &ln.g
	if r.done == 0 {
		if r.src.OutPinned && uint64(cap(r.src.Out)) >= r.hsz+n {
			r.out, r.pinned, r.gEarly = r.src.Out[:r.hsz], true, true
			clear(r.out)
		}
	}
	if !r.gEarly || n == 0 {
		return nil
	}
	if n > uint64(cap(r.out)-len(r.out)) || r.gOff+n > gb.snapCap {
		r.gEarly = false
		return nil
	}
	n0 := len(r.out)
	r.out = r.out[:n0+int(n)]
	if err := l.cerr(l.copyD2H(s.dev, unsafe.Pointer(&r.out[n0]), gb.snap+uintptr(r.gOff), n, 2, gb.cp), "copy from GPU"); err != nil {
		return err
	}
	r.gOff += n
	return nil
}

// errGatherRoom: the snapshot's chunks did not fit the buffer; need is
// what they take.
type errGatherRoom struct{ need uint64 }

func (e errGatherRoom) Error() string {
	return fmt.Sprintf("the GPU snapshot buffer is too small: the snapshot needs %d bytes", e.need)
}

// gatherFinish completes the copy back once every job was collected (so
// every gather is done): the state (bytes, flag, checksums) follows the
// early copies on the copy stream, and one wait covers both; the bytes
// not yet copied (all of them where there were no early copies) then go
// to the blob after its hsz header bytes. Returns the chunks' checksums.
func (r *run) gatherFinish(chunks uint64) ([]uint32, error) {
	ln := r.ln
	s, l := ln.s, ln.s.lib
	gb := &ln.g
	t0 := time.Now()
	defer func() { r.tApp += time.Since(t0) }()
	st := gatherStateBytes + 4*chunks
	if err := l.cerr(l.copyD2H(s.dev, gb.hState, gb.state, st, 2, gb.cp), "copy from GPU"); err != nil {
		return nil, err
	}
	if err := l.cerr(l.eventRecord(s.dev, gb.cpDone, gb.cp), "record event"); err != nil {
		return nil, err
	}
	if err := l.cerr(l.eventSync(s.dev, gb.cpDone), "GPU gather"); err != nil {
		return nil, err
	}
	hs := unsafe.Slice((*uint64)(gb.hState), 3)
	n := hs[0]
	gb.want = max(gb.want, n+n/4)
	if hs[1] != 0 {
		return nil, errGatherRoom{need: n}
	}
	if n > gb.snapCap {
		return nil, fmt.Errorf("GPU gather: %d bytes gathered into a %d-byte buffer", n, gb.snapCap)
	}
	if n != r.gSum {
		return nil, fmt.Errorf("GPU gather: %d bytes gathered, the jobs report %d", n, r.gSum)
	}
	crcs := make([]uint32, chunks)
	copy(crcs, unsafe.Slice((*uint32)(unsafe.Add(gb.hState, gatherStateBytes)), chunks))
	total := r.hsz + n
	if r.out != nil && uint64(len(r.out)) == total { // the early copies took every byte, and are done
		return crcs, nil
	}
	switch {
	case r.out != nil && uint64(cap(r.out)) >= total: // the early copies' blob: the rest after them
	case r.out != nil: // it ran out of room: wait for the copies into it, go on in Go memory
		if err := l.cerr(l.streamSync(s.dev, gb.cp), "copy from GPU"); err != nil {
			return nil, err
		}
		b := make([]byte, len(r.out), total)
		copy(b, r.out)
		r.out, r.pinned = b, false
	case r.src.OutPinned && uint64(cap(r.src.Out)) >= total:
		r.out, r.pinned = r.src.Out[:r.hsz], true
	case !r.src.OutPinned && uint64(cap(r.src.Out)) >= total:
		r.out = r.src.Out[:r.hsz]
	default:
		r.out = make([]byte, r.hsz, total)
	}
	clear(r.out[:r.hsz])
	done := uint64(len(r.out)) - r.hsz
	r.out = r.out[:total]
	if n > done {
		if err := l.cerr(l.copyD2H(s.dev, unsafe.Pointer(&r.out[r.hsz+done]), gb.snap+uintptr(done), n-done, 2, gb.cp), "copy from GPU"); err != nil {
			return nil, err
		}
	}
	if err := l.cerr(l.eventRecord(s.dev, gb.cpDone, gb.cp), "record event"); err != nil {
		return nil, err
	}
	if err := l.cerr(l.eventSync(s.dev, gb.cpDone), "copy from GPU"); err != nil {
		return nil, err
	}
	return crcs, nil
}

// deviceTurns (device lanes that assemble on the device) make the lanes'
// kernels run one snapshot after another on the GPU, while their copies
// back overlap: a lane takes the turn before its first kernel, makes its
// stream wait for the previous turn's last kernel, and hands the turn on
// once its kernels are issued (the host waits for nothing in between,
// unless a snapshot has more jobs than the lane has streams). The encoder
// is built for a GPU of its own (persistent warps, latency-bound: PERF.md);
// measured on an H100 (docs/PIPELINE.md), 2-4 lanes running their kernels
// side by side compressed at about half the kernel-only rate.
// FZ_GPU_DEVICE_TURNS=0 lets them run side by side (comparisons).
var deviceTurnsOff = os.Getenv("FZ_GPU_DEVICE_TURNS") == "0"

type deviceTurns struct {
	mu   sync.Mutex
	last uintptr // event: the last turn's last kernel (0: none yet)
}

// take waits for the turn and orders stream after the previous one's
// kernels; the caller gives it back with done or drop.
func (t *deviceTurns) take(s *Streamer, stream uintptr) error {
	t.mu.Lock()
	if t.last == 0 {
		if err := s.lib.cerr(s.lib.eventCreate(s.dev, &t.last), "create event"); err != nil {
			t.last = 0
			t.mu.Unlock()
			return err
		}
		return nil
	}
	if err := s.lib.cerr(s.lib.streamWait(s.dev, stream, t.last), "stream wait"); err != nil {
		t.mu.Unlock()
		return err
	}
	return nil
}

// done marks the end of the turn's kernels on stream and gives it back.
func (t *deviceTurns) done(s *Streamer, stream uintptr) error {
	defer t.mu.Unlock()
	return s.lib.cerr(s.lib.eventRecord(s.dev, t.last, stream), "record event")
}

// drop gives the turn back after an error (the next turn then waits for
// the one before).
func (t *deviceTurns) drop() { t.mu.Unlock() }
