package pipeline

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/ingest"
)

// regLog stands in for cudaHostRegister (no GPU here): it records which
// page ranges are registered, so the test sees every registration undone
// exactly once and never one dropped while in use.
type regLog struct {
	mu    sync.Mutex
	live  map[uintptr]int
	count int
	fail  error
}

func (r *regLog) register(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	if r.live[p] != 0 {
		return errors.New("registered twice")
	}
	r.live[p] = len(b)
	r.count++
	return nil
}

func (r *regLog) unregister(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := uintptr(unsafe.Pointer(&b[0]))
	if r.live[p] == 0 {
		return errors.New("not registered")
	}
	delete(r.live, p)
	return nil
}

func (r *regLog) state() (live, count int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.live), r.count
}

func writeSeg(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestPinCache(t *testing.T) {
	dir := t.TempDir()
	shm, err := ingest.OpenShmDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer shm.Close()
	rl := &regLog{live: map[uintptr]int{}}
	c := newPinCache(3<<20, rl.register, rl.unregister)
	clock := time.Unix(1000, 0)
	c.mu.Lock()
	c.now = func() time.Time { return clock }
	c.mu.Unlock()
	page := os.Getpagesize()
	data := bytes.Repeat([]byte{7}, 1<<20)
	writeSeg(t, dir, "a.seg", data)
	use := func(name string, wantHit bool) *pinEntry {
		t.Helper()
		m, err := shm.Map(name, 0, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		e, hit, err := c.acquire(m)
		if err != nil {
			t.Fatal(err)
		}
		if hit != wantHit {
			t.Fatalf("%s: hit %v, want %v", name, hit, wantHit)
		}
		if !bytes.Equal(e.m.Bytes(), data) || len(e.m.Pages())%page != 0 {
			t.Fatalf("%s: cached mapping does not show the segment", name)
		}
		return e
	}
	// A reused segment is registered once.
	c.release(use("a.seg", false))
	c.release(use("a.seg", true))
	if live, n := rl.state(); live != 1 || n != 1 {
		t.Fatalf("after reuse: %d live registrations, %d made; want 1, 1", live, n)
	}
	// Rewritten with pwrite: that changes ctime, so it counts as another
	// file (a miss); the stale entry goes at the next sweep.
	time.Sleep(20 * time.Millisecond) // ctime has coarse ticks
	w, err := os.OpenFile(filepath.Join(dir, "a.seg"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Repeat([]byte{9}, 1<<20)
	if _, err := w.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	e := use("a.seg", false)
	c.sweep()
	if live, n := rl.state(); live != 1 || n != 2 {
		t.Fatalf("after rewrite: %d live, %d made; want 1, 2", live, n)
	}
	// In use: a sweep must not drop it even once the file is unlinked.
	if err := os.Remove(filepath.Join(dir, "a.seg")); err != nil {
		t.Fatal(err)
	}
	c.sweep()
	if live, _ := rl.state(); live != 1 {
		t.Fatal("sweep dropped a registration in use")
	}
	c.release(e)
	c.sweep()
	if b, n := c.size(); b != 0 || n != 0 {
		t.Fatalf("unlinked segment still cached: %d bytes in %d entries", b, n)
	}
	if live, _ := rl.state(); live != 0 {
		t.Fatal("unlinked segment still registered")
	}

	// Truncated and re-grown to the same size: other pages, so a miss.
	writeSeg(t, dir, "b.seg", data)
	c.release(use("b.seg", false))
	time.Sleep(20 * time.Millisecond) // ctime has coarse ticks
	if err := os.Truncate(filepath.Join(dir, "b.seg"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "b.seg"), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	data = make([]byte, len(data))
	c.release(use("b.seg", false))

	// The byte limit (3 MiB) evicts the least recently used idle entry.
	for _, n := range []string{"c.seg", "d.seg", "e.seg"} {
		writeSeg(t, dir, n, data)
		clock = clock.Add(time.Second)
		c.release(use(n, false))
	}
	if b, n := c.size(); b > 3<<20 || n != 3 {
		t.Fatalf("cache holds %d bytes in %d entries; want <= 3 MiB in 3", b, n)
	}
	c.release(use("e.seg", true))
	c.release(use("d.seg", true))
	c.release(use("c.seg", true))

	// Idle entries go after pinIdle.
	clock = clock.Add(pinIdle + time.Second)
	c.sweep()
	if b, n := c.size(); b != 0 || n != 0 {
		t.Fatalf("idle entries kept: %d bytes in %d entries", b, n)
	}

	// A registration failure leaves the mapping to the caller.
	rl.mu.Lock()
	rl.fail = errors.New("cudaHostRegister: operation not permitted")
	rl.mu.Unlock()
	m, err := shm.Map("c.seg", 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.acquire(m); err == nil {
		t.Fatal("acquire succeeded although registration failed")
	}
	if !bytes.Equal(m.Bytes(), data) {
		t.Fatal("mapping unusable after a failed registration")
	}
	m.Close()
	c.close()
	if live, _ := rl.state(); live != 0 {
		t.Fatalf("%d registrations left after close", live)
	}
}
