package cuda

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
	"golang.org/x/sys/unix"
)

func newStreamer(t testing.TB, dev int, o StreamOptions) *Streamer {
	t.Helper()
	gpu(t)
	s, err := NewStreamer(dev, o)
	if err != nil {
		t.Fatalf("NewStreamer(%d): %v", dev, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// pinnedCopy returns raw in page-locked memory (an anonymous mapping
// registered as a segment mapping would be).
func pinnedCopy(t testing.TB, raw []byte) []byte {
	t.Helper()
	m, err := unix.Mmap(-1, 0, max(len(raw), 1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, raw)
	if err := RegisterHost(m); err != nil {
		t.Fatalf("register: %v", err)
	}
	t.Cleanup(func() { UnregisterHost(m); unix.Munmap(m) })
	return m[:len(raw)]
}

func smoothField(dt fz.DType, dims []uint64, seed int) []byte {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Sin(float64(i)*0.001+float64(seed))*50 + math.Cos(float64(i%977)*0.01)
		if r.IntN(5000) == 0 {
			v[i] = math.NaN()
		}
	}
	if dt == fz.Float64 {
		return f64bytes(v)
	}
	v32 := make([]float32, n)
	for i, x := range v {
		v32[i] = float32(x)
	}
	return f32bytes(v32)
}

// checkStreamed compresses src through s and requires the CPU's bytes
// (want) and stats (wst).
func checkStreamed(t *testing.T, s *Streamer, name string, src Source, p fz.Params, want []byte, wst fz.Stats,
	opts ...fz.Option) {
	t.Helper()
	got, gst, err := s.Compress(context.Background(), src, p, opts...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the CPU's %d at %d", name, len(got), len(want), firstDiff(got, want))
	}
	if gst != wst {
		t.Fatalf("%s: stats %+v, CPU %+v", name, gst, wst)
	}
}

// TestStreamerMatchesCPU compresses from pinned and from staged memory,
// with an arena that holds the field (resident) and one that forces the
// field through two sliding windows (and rel's two passes), and requires
// the CPU's bytes and stats every time.
func TestStreamerMatchesCPU(t *testing.T) {
	ctx := context.Background()
	arenas := []struct {
		name string
		o    StreamOptions
	}{
		{"resident", StreamOptions{JobTiles: 64, ArenaBytes: 256 << 20, StageBytes: 8 << 20}},
		{"windows", StreamOptions{JobTiles: 16, ArenaBytes: 6 << 20, StageBytes: 4 << 20, CopyThreads: 3}},
	}
	shapes := [][]uint64{{3_000_001}, {1500, 1700}, {37, 61, 333}, {64, 96, 200}, {5, 4096}, {2, 3, 4, 5}}
	n := 0
	for _, a := range arenas {
		s := newStreamer(t, 0, a.o)
		for si, dims := range shapes {
			for _, dt := range []fz.DType{fz.Float32, fz.Float64} {
				raw := smoothField(dt, dims, si)
				pinned := pinnedCopy(t, raw)
				for _, mode := range []fz.Mode{fz.Abs, fz.Rel} {
					p := fz.Params{DType: dt, Dims: dims, Mode: mode, Bound: 1e-3}
					if si%2 == 1 {
						p.Fill = ptr(math.NaN())
					}
					for _, ver := range formatVersions {
						opts := withVersion(ver, fz.WithTilesPerChunk(4))
						if si%3 == 2 { // flat tiles (docs/FORMAT.md 3.1): jobs are runs of values (jobSpan)
							opts = append(opts, fz.WithTiling(fz.TilingFlat))
						}
						want, wst, err := fz.Compress(ctx, raw, p, opts...)
						if err != nil {
							t.Fatal(err)
						}
						// The staged case writes into a reused output buffer full of
						// garbage: nothing of it may show.
						garbage := bytes.Repeat([]byte{0xAB}, 2*len(raw)+(1<<20))
						for _, src := range []Source{{Bytes: pinned, Pinned: true}, {Bytes: raw, Out: garbage[:0]}} {
							name := fmt.Sprintf("%s %v %v %v pinned=%v v%d", a.name, dims, dt, mode, src.Pinned, ver)
							checkStreamed(t, s, name, src, p, want, wst, opts...)
							n++
						}
					}
				}
			}
		}
	}
	t.Logf("%d streamed compressions byte-identical to the CPU (resident and windowed arenas, pinned and staged sources, container versions 1 and 2)", n)
}

// TestStreamerErrors: a job wider than the window is refused with the
// reason; a copy error from the source (a truncated segment) comes back.
func TestStreamerErrors(t *testing.T) {
	ctx := context.Background()
	s := newStreamer(t, 0, StreamOptions{JobTiles: 16, ArenaBytes: 1 << 20, StageBytes: 4 << 20})
	// 3D tiles span 8 planes of 512x512 f32 (8 MiB) > the 512 KiB window.
	raw := make([]byte, 4*16*512*512)
	_, _, err := s.Compress(ctx, Source{Bytes: raw}, fz.Params{DType: fz.Float32, Dims: []uint64{16, 512, 512}, Mode: fz.Abs, Bound: 1}, fz.WithTilesPerChunk(4))
	if err == nil {
		t.Fatal("a job wider than the arena window was accepted")
	}
	t.Logf("wide job: %v", err)
	boom := fmt.Errorf("segment changed size while being read")
	_, _, err = s.Compress(ctx, Source{Bytes: make([]byte, 4<<20), Copy: func(d, s []byte) error { return boom }},
		fz.Params{DType: fz.Float32, Dims: []uint64{1 << 20}, Mode: fz.Abs, Bound: 1}, fz.WithTilesPerChunk(4))
	if !errors.Is(err, boom) {
		t.Fatalf("failing copy: got %v, want the source's error", err)
	}
	t.Logf("failing copy: %v", err)
	// The lane is usable afterwards.
	raw = smoothField(fz.Float32, []uint64{1 << 20}, 1)
	p := fz.Params{DType: fz.Float32, Dims: []uint64{1 << 20}, Mode: fz.Rel, Bound: 1e-3}
	want, _, _ := fz.Compress(ctx, raw, p, fz.WithTilesPerChunk(4))
	got, _, err := s.Compress(ctx, Source{Bytes: raw}, p, fz.WithTilesPerChunk(4))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after errors: err %v, equal %v", err, bytes.Equal(got, want))
	}
}

// TestStreamerConcurrent: several snapshots at once over the lanes of
// every device give the bytes they give alone.
func TestStreamerConcurrent(t *testing.T) {
	gpu(t)
	var nd int32
	gpuB.lib.deviceCount(&nd)
	var ss []*Streamer
	for d := 0; d < int(nd); d++ {
		ss = append(ss, newStreamer(t, d, StreamOptions{ArenaBytes: 64 << 20, JobTiles: 512}))
	}
	ctx := context.Background()
	const jobs = 12
	var wg sync.WaitGroup
	errs := make([]error, jobs)
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dims := []uint64{uint64(20 + i), 128, 256}
			raw := smoothField(fz.Float32, dims, i)
			p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-4}
			want, _, _ := fz.Compress(ctx, raw, p)
			got, _, err := ss[i%len(ss)].Compress(ctx, Source{Bytes: raw}, p)
			if err == nil && !bytes.Equal(got, want) {
				err = fmt.Errorf("snapshot %d on device %d differs from the CPU", i, i%len(ss))
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d concurrent snapshots over %d device(s) x %d lanes byte-identical", jobs, len(ss), ss[0].Lanes())
}

// TestStreamerBig (FZ_GPU_BIG=1): a 6 GiB rel field through a 1 GiB arena,
// i.e. larger than the device buffer: two passes through sliding windows,
// bytes identical to the CPU.
func TestStreamerBig(t *testing.T) {
	if os.Getenv("FZ_GPU_BIG") == "" {
		t.Skip("SKIP: set FZ_GPU_BIG=1 for the 6 GiB streamed field")
	}
	s := newStreamer(t, 0, StreamOptions{ArenaBytes: 1 << 30})
	dims := []uint64{1536, 1024, 1024}
	raw := make([]byte, 4*1536*1024*1024)
	parallelChunks(1536, 0, func(z int) {
		v := fz.ViewFloats[float32](raw[z*4<<20 : (z+1)*4<<20])
		for i := range v {
			v[i] = float32(math.Sin(float64(z)*0.01+float64(i%1024)*0.003) * float64(1+i/1024%7))
		}
	})
	ctx := context.Background()
	p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3}
	pinned := pinnedCopy(t, raw)
	got, st, err := s.Compress(ctx, Source{Bytes: pinned, Pinned: true}, p)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := fz.Compress(ctx, raw, p)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("6 GiB streamed field differs from the CPU (%d vs %d bytes)", len(got), len(want))
	}
	t.Logf("%.2f GB field through a 1 GiB arena: %d bytes, ratio %.2f, identical to the CPU", float64(len(raw))/1e9, len(got), float64(len(raw))/float64(st.CompressedBytes))
}
