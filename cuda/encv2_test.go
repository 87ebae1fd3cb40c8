package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// formatVersions are the container versions the encoder identity tests
// run: each writes its own bytes, and the GPU's must be the CPU's.
var formatVersions = []int{1, 2}

// withVersion is opts with fz.WithFormatVersion(v) added.
func withVersion(v int, opts ...fz.Option) []fz.Option {
	return append(append([]fz.Option(nil), opts...), fz.WithFormatVersion(v))
}

// tileWords0 is word 0 of every tile of a container, in tile order (the
// chunks' size tables give where each tile starts).
func tileWords0(t *testing.T, blob []byte) []uint32 {
	t.Helper()
	c := openContainer(t, blob)
	h, g := c.h, c.g
	var w0 []uint32
	for c, ch := range h.Chunks {
		first, end := g.ChunkTiles(uint64(c))
		k := end - first
		at := ch.Offset + 4*k
		for i := uint64(0); i < k; i++ {
			size := uint64(binary.LittleEndian.Uint32(blob[ch.Offset+4*i:]))
			w0 = append(w0, binary.LittleEndian.Uint32(blob[at:]))
			at += size
		}
	}
	return w0
}

// escapeTiles counts the tiles of a container with escapes (word 0 bit 16).
func escapeTiles(t *testing.T, blob []byte) int {
	n := 0
	for _, w := range tileWords0(t, blob) {
		if w&(1<<16) != 0 {
			n++
		}
	}
	return n
}

// spikeField is a field of small integers (|x| <= 3) with one spike per
// tile whose neighbourhood (2 values each way in every axis) is 0, so that
// under ABS 0.5 (step 1, q = x) the spike's residual is exactly its value
// and its forward neighbours' are ±value. spikes[i % len] is tile i's
// spike; tile (tz, ty, tx) is the geometry's.
func spikeField(dims []uint64, spikes []float64, seed uint64) []float64 {
	d := append([]uint64(nil), dims...)
	for len(d) < 3 {
		d = append([]uint64{1}, d...)
	}
	nz, ny, nx := int(d[0]), int(d[1]), int(d[2])
	// the standard tile shapes (FORMAT.md section 3) by rank
	tz, ty, tx := 8, 16, 32
	switch {
	case nz == 1 && ny == 1:
		tz, ty, tx = 1, 1, 4096
	case nz == 1:
		tz, ty, tx = 1, 64, 64
	}
	r := rand.New(rand.NewPCG(seed, 5))
	v := make([]float64, nz*ny*nx)
	for i := range v {
		v[i] = float64(r.IntN(7) - 3)
	}
	idx := func(z, y, x int) int { return (z*ny+y)*nx + x }
	tile := 0
	for z0 := 0; z0 < nz; z0 += tz {
		for y0 := 0; y0 < ny; y0 += ty {
			for x0 := 0; x0 < nx; x0 += tx {
				lz, ly, lx := min(tz, nz-z0), min(ty, ny-y0), min(tx, nx-x0)
				pz, py, px := z0+max(0, min(2, lz-2)), y0+max(0, min(2, ly-2)), x0+max(0, min(2, lx-2))
				for z := max(0, pz-2); z <= min(nz-1, pz+2); z++ {
					for y := max(0, py-2); y <= min(ny-1, py+2); y++ {
						for x := max(0, px-2); x <= min(nx-1, px+2); x++ {
							v[idx(z, y, x)] = 0
						}
					}
				}
				v[idx(pz, py, px)] = spikes[tile%len(spikes)]
				tile++
			}
		}
	}
	return v
}

// TestAdversarialEscapeEdgesMatchCPU: residuals of exactly ±32766, ±32767
// and ±32768 (version 1 escapes |d| >= 32768, version 2 |d| >= 32767) in
// full tiles of the hot walks (f32 rank 3: the optimistic kernels, the
// hot full kernel and its slow path, the fill kernel's escape rewrite;
// rank 2 and 1; f64) and in clipped tiles (the generic path), for both
// container versions, one job and streamed (host and device-resident
// sources). The CPU's containers show that the fields hit the thresholds:
// each version's escape tiles are counted against the spikes.
func TestAdversarialEscapeEdgesMatchCPU(t *testing.T) {
	g := gpu(t)
	ctx := context.Background()
	shapes := [][]uint64{
		{16, 32, 64}, // 8 full rank-3 tiles
		{12, 20, 40}, // rank-3 tiles clipped in every axis
		{128, 128},   // 4 full rank-2 tiles
		{100, 70},    // clipped rank-2 tiles
		{16384},      // 4 full rank-1 tiles
		{10000},      // a clipped rank-1 tile
	}
	type spikeSet struct {
		name   string
		spikes []float64
		// tiles with escapes: none, some or all (-1: at least one)
		esc1, esc2 int
	}
	sets := []spikeSet{
		{"32766", []float64{32766, -32766}, 0, 0},
		{"32767", []float64{32767, -32767}, 0, -1},
		{"32768", []float64{32768, -32768}, -1, -1},
		{"mixed", []float64{32766, 32767, 32768, -32767, 0}, -1, -1},
	}
	s := newStreamer(t, 0, StreamOptions{JobTiles: 64, ArenaBytes: 64 << 20, StageBytes: 4 << 20})
	// FZ_GPU_SHORT (compute-sanitizer runs): the mixed spikes in f32, one job
	short := os.Getenv("FZ_GPU_SHORT") != ""
	cases := 0
	for si, dims := range shapes {
		for _, set := range sets {
			if short && set.name != "mixed" {
				continue
			}
			v64 := spikeField(dims, set.spikes, uint64(si))
			v32 := make([]float32, len(v64))
			for i, x := range v64 {
				v32[i] = float32(x)
			}
			for _, dt := range []fz.DType{fz.Float32, fz.Float64} {
				if short && dt == fz.Float64 {
					continue
				}
				raw := f32bytes(v32)
				if dt == fz.Float64 {
					raw = f64bytes(v64)
				}
				// without fill: the f32 rank-3 field takes the optimistic and
				// hot kernels; with a fill value (present in the last tile only,
				// far from its spike) the fill kernel's walk, which rewrites
				// escapes itself
				for _, fill := range []bool{false, true} {
					p := fz.Params{DType: dt, Dims: dims, Mode: fz.Abs, Bound: 0.5}
					fraw := raw
					if fill {
						p.Fill = ptr(-9999)
						fraw = append([]byte(nil), raw...)
						last := len(v64) - 1
						if dt == fz.Float32 {
							binary.LittleEndian.PutUint32(fraw[4*last:], math.Float32bits(-9999))
						} else {
							binary.LittleEndian.PutUint64(fraw[8*last:], math.Float64bits(-9999))
						}
					}
					esc := map[int]int{}
					for _, ver := range formatVersions {
						name := fmt.Sprintf("spikes %s %v %v fill=%v v%d", set.name, dims, dt, fill, ver)
						opts := withVersion(ver, fz.WithTilesPerChunk(3))
						check(t, g, name, fraw, p, opts...)
						cases++
						want, wst, err := fz.Compress(ctx, fraw, p, opts...)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						esc[ver] = escapeTiles(t, want)
						if !short && (si == 0 || si == 2 || si == 4) { // full tiles: streamed too
							checkStreamed(t, s, name+", streamed", Source{Bytes: fraw}, p, want, wst, opts...)
							checkDeviceSource(t, s, name+", device-resident", fraw, p, want, wst, opts...)
							cases += 3
						}
					}
					for ver, want := range map[int]int{1: set.esc1, 2: set.esc2} {
						if (want == 0) != (esc[ver] == 0) {
							t.Fatalf("spikes %s %v %v: the CPU's version-%d container has %d tiles with escapes, want %s",
								set.name, dims, dt, ver, esc[ver], map[bool]string{true: "none", false: "some"}[want == 0])
						}
					}
				}
			}
		}
	}
	t.Logf("%d compressions with residuals at the escape thresholds byte-identical to the CPU (versions 1 and 2)", cases)
}

// checkDeviceSource compresses raw from device memory (a GPU-resident
// snapshot, Source.Device) through s and requires the CPU's bytes: at the
// start of an allocation, and one element into one, as a producer's
// offset may put it (rows not 16-byte aligned: fzgpu.cu then dispatches
// the kernels that stage rows by 4-byte copies, not the AL16 ones).
func checkDeviceSource(t *testing.T, s *Streamer, name string, raw []byte, p fz.Params, want []byte, wst fz.Stats, opts ...fz.Option) {
	t.Helper()
	l := s.lib
	for _, off := range []uint64{0, uint64(p.DType.Size())} {
		var d uintptr
		if err := l.cerr(l.malloc(s.dev, off+uint64(len(raw)), &d), "allocate"); err != nil {
			t.Fatal(err)
		}
		defer l.free(s.dev, d)
		at := d + uintptr(off)
		if err := l.cerr(l.copyH2D(s.dev, at, unsafe.Pointer(unsafe.SliceData(raw)), uint64(len(raw)), 1, 0), "copy to GPU"); err != nil {
			t.Fatal(err)
		}
		if err := l.cerr(l.streamSync(s.dev, 0), "copy to GPU"); err != nil {
			t.Fatal(err)
		}
		checkStreamed(t, s, fmt.Sprintf("%s at byte %d of its allocation", name, off),
			Source{Device: at, DeviceBytes: uint64(len(raw))}, p, want, wst, opts...)
	}
}
