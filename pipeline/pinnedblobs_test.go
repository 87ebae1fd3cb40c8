package pipeline

import (
	"errors"
	"testing"
)

// fakePinned stands in for cudaHostAlloc/cudaFreeHost: it counts what is
// allocated and refuses to free what it did not allocate.
type fakePinned struct {
	live  map[*byte]bool
	fail  bool
	frees int
}

func (f *fakePinned) alloc(n uint64) ([]byte, error) {
	if f.fail {
		return nil, errors.New("out of pinned memory")
	}
	b := make([]byte, n)
	f.live[&b[0]] = true
	return b, nil
}

func (f *fakePinned) free(b []byte) error {
	p := &b[:1][0]
	if !f.live[p] {
		return errors.New("free of memory not allocated")
	}
	delete(f.live, p)
	f.frees++
	return nil
}

func TestPinnedBlobs(t *testing.T) {
	f := &fakePinned{live: map[*byte]bool{}}
	b := newPinnedBlobs(f.alloc, f.free)
	const mib = 1 << 20
	// No size known yet: raw/8 + 1 MiB, rounded to MiB.
	x := b.get(64 * mib)
	if x == nil || cap(x) != 9*mib || len(x) != 0 {
		t.Fatalf("first blob: cap %d len %d, want cap %d len 0", cap(x), len(x), 9*mib)
	}
	// A slice of it (the blob the pipeline stores) goes back to the pool.
	if !b.put(x[:5*mib]) {
		t.Fatal("put of a pinned blob's prefix: not recognized")
	}
	if b.put(make([]byte, 10)) {
		t.Fatal("put of a Go slice: taken as pinned")
	}
	if y := b.get(64 * mib); &y[:1][0] != &x[:1][0] {
		t.Fatal("an idle blob large enough was not reused")
	} else {
		b.put(y)
	}
	// A snapshot needed 16 MiB: idle blobs smaller than 16 MiB * 1.25 + 1 MiB are freed, a new one is larger.
	b.noteNeed(16 * mib)
	z := b.get(64 * mib)
	if cap(z) != 21*mib {
		t.Fatalf("blob after a 16 MiB need: cap %d, want %d", cap(z), 21*mib)
	}
	if f.frees != 1 {
		t.Fatalf("too-small idle blob: %d frees, want 1", f.frees)
	}
	if live, bytes, idle := b.stats(); live != 1 || bytes != 21*mib || idle != 0 {
		t.Fatalf("stats: %d live, %d bytes, %d idle; want 1, %d, 0", live, bytes, idle, 21*mib)
	}
	// Limits: at most maxN live blobs, then nil (the caller uses a Go blob).
	b.maxN = 2
	w := b.get(64 * mib)
	if w == nil {
		t.Fatal("second blob refused under a limit of 2")
	}
	if v := b.get(64 * mib); v != nil {
		t.Fatal("a third blob given over a limit of 2")
	}
	b.put(z)
	b.put(w)
	// close frees the idle ones; nothing is left allocated.
	b.close()
	if len(f.live) != 0 {
		t.Fatalf("after close: %d blobs still allocated", len(f.live))
	}
	// A failed allocation: nil, and no retries.
	f2 := &fakePinned{live: map[*byte]bool{}, fail: true}
	b2 := newPinnedBlobs(f2.alloc, f2.free)
	if b2.get(mib) != nil || b2.lastErr == nil {
		t.Fatal("failed allocation: expected nil and the error kept")
	}
	f2.fail = false
	if b2.get(mib) != nil {
		t.Fatal("allocation retried after a failure")
	}
}

// prefill makes idle blobs up to a count, within the limits, and get
// hands them out without allocating.
func TestPinnedBlobsPrefill(t *testing.T) {
	f := &fakePinned{live: map[*byte]bool{}}
	b := newPinnedBlobs(f.alloc, f.free)
	const mib = 1 << 20
	b.maxN = 5
	b.prefill(4, 64*mib)
	if live, bytes, idle := b.stats(); live != 4 || idle != 4 || bytes != 4*9*mib {
		t.Fatalf("after prefill(4): %d live, %d idle, %d bytes; want 4, 4, %d", live, idle, bytes, 4*9*mib)
	}
	b.prefill(4, 64*mib) // already there: nothing more
	if live, _, _ := b.stats(); live != 4 {
		t.Fatalf("a second prefill(4) allocated: %d live", live)
	}
	var got [][]byte
	for range 4 {
		got = append(got, b.get(64*mib))
	}
	if len(f.live) != 4 {
		t.Fatalf("get after prefill allocated: %d allocations", len(f.live))
	}
	b.prefill(8, 64*mib) // the limit of 5 live blobs stops it
	if live, _, idle := b.stats(); live != 5 || idle != 1 {
		t.Fatalf("prefill over the limit: %d live, %d idle; want 5, 1", live, idle)
	}
	for _, x := range got {
		b.put(x)
	}
	b.close()
	if len(f.live) != 0 {
		t.Fatalf("after close: %d blobs still allocated", len(f.live))
	}
	// A failed allocation stops it and is kept.
	f2 := &fakePinned{live: map[*byte]bool{}, fail: true}
	b2 := newPinnedBlobs(f2.alloc, f2.free)
	b2.prefill(3, mib)
	if b2.err() == nil {
		t.Fatal("prefill: failed allocation not kept")
	}
}
