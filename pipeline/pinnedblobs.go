package pipeline

import (
	"sync"
	"unsafe"
)

// pinnedBlobs are page-locked output blobs for GPU-resident snapshots:
// their lanes copy the compressed bytes from the GPU straight to their
// place in such a blob (cuda.Source.OutPinned; assembled on the device, or
// exact copy-back with FZ_GPU_EXACT=1), so the host copies no compressed
// byte. A blob goes back to the pool when the pipeline releases it
// (GPU.Release) and is freed when the pool holds too many or at Close.
// Allocating one (cudaHostAlloc, ~130 MB for a 1 GiB snapshot) took
// 40-270 ms on an H100 host, and the lanes' CUDA calls waited with it: the
// first device snapshot fills the pool (prefill, two blobs per device lane).
//
// Sizes: a blob must hold the snapshot's compressed bytes, known only
// after it ran. The pool sizes new blobs from the largest a device
// snapshot needed so far (+25 %), and the first one from raw/8; a blob too
// small is not an error (the streamer goes on in Go memory) but counts as
// a need, so the next blobs are larger.
type pinnedBlobs struct {
	alloc func(n uint64) ([]byte, error)
	free  func([]byte) error

	mu      sync.Mutex
	idle    [][]byte
	live    map[*byte]uint64 // every blob allocated and not freed: its size
	bytes   uint64           // summed sizes of live
	need    uint64           // the largest blob a snapshot needed
	maxN    int              // at most this many live blobs
	maxB    uint64           // and at most this many bytes
	failed  bool             // an allocation failed: none are tried again
	lastErr error
}

const (
	pinnedBlobsMax      = 64
	pinnedBlobsMaxBytes = 8 << 30
)

func newPinnedBlobs(alloc func(uint64) ([]byte, error), free func([]byte) error) *pinnedBlobs {
	return &pinnedBlobs{alloc: alloc, free: free, live: map[*byte]uint64{}, maxN: pinnedBlobsMax, maxB: pinnedBlobsMaxBytes}
}

// want is the size of a new blob for a snapshot of raw bytes.
func (b *pinnedBlobs) want(raw uint64) uint64 {
	n := b.need + b.need/4
	if b.need == 0 {
		n = raw / 8
	}
	return (n + 1<<20 + (1<<20 - 1)) &^ (1<<20 - 1)
}

// get returns an idle blob large enough for a snapshot of raw bytes, or a
// new one; nil where the limits (or a failed allocation) allow none: the
// snapshot then gets a Go blob.
func (b *pinnedBlobs) get(raw uint64) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.want(raw)
	for len(b.idle) > 0 {
		x := b.idle[len(b.idle)-1]
		b.idle = b.idle[:len(b.idle)-1]
		if uint64(cap(x)) >= w {
			return x[:0]
		}
		b.freeLocked(x) // too small for what snapshots now need
	}
	if b.failed || len(b.live) >= b.maxN || b.bytes+w > b.maxB {
		return nil
	}
	x, err := b.alloc(w)
	if err != nil {
		b.failed, b.lastErr = true, err
		return nil
	}
	b.live[unsafe.SliceData(x)] = uint64(cap(x))
	b.bytes += uint64(cap(x))
	return x[:0]
}

// prefill allocates idle blobs for snapshots of raw bytes until n are
// idle (or the limits stop it), so that a run's first snapshots do not
// each wait for an allocation: on an H100 host each cudaHostAlloc of
// ~130 MB took 40-270 ms, and the lanes' CUDA calls waited with it.
func (b *pinnedBlobs) prefill(n int, raw uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.want(raw)
	for len(b.idle) < n && !b.failed && len(b.live) < b.maxN && b.bytes+w <= b.maxB {
		x, err := b.alloc(w)
		if err != nil {
			b.failed, b.lastErr = true, err
			return
		}
		b.live[unsafe.SliceData(x)] = uint64(cap(x))
		b.bytes += uint64(cap(x))
		b.idle = append(b.idle, x[:0])
	}
}

// put takes a blob back if it is one of the pool's (any slice starting at
// its first byte); false means it is not pinned.
func (b *pinnedBlobs) put(x []byte) bool {
	if cap(x) == 0 {
		return false
	}
	p := unsafe.SliceData(x)
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.live[p]
	if !ok {
		return false
	}
	x = unsafe.Slice(p, n)
	if len(b.idle) >= b.maxN || uint64(cap(x)) < b.want(0) && b.need > 0 {
		b.freeLocked(x)
		return true
	}
	b.idle = append(b.idle, x[:0])
	return true
}

// noteNeed records a snapshot's blob size.
func (b *pinnedBlobs) noteNeed(n uint64) {
	b.mu.Lock()
	b.need = max(b.need, n)
	b.mu.Unlock()
}

func (b *pinnedBlobs) freeLocked(x []byte) {
	p := unsafe.SliceData(x)
	b.bytes -= b.live[p]
	delete(b.live, p)
	b.free(x)
}

// close frees the idle blobs; blobs not yet released stay allocated.
func (b *pinnedBlobs) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, x := range b.idle {
		b.freeLocked(x)
	}
	b.idle = nil
}

// err is why an allocation failed, if one did.
func (b *pinnedBlobs) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

// stats: live blobs and their bytes, idle ones (tests, logs).
func (b *pinnedBlobs) stats() (live int, bytes uint64, idle int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.live), b.bytes, len(b.idle)
}
