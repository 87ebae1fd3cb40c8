package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// containerTiles are the tiles of a container, in tile order, each its
// exact bytes, and each one's value count.
func containerTiles(t *testing.T, blob []byte) (tiles [][]byte, ns []uint32) {
	t.Helper()
	c := openContainer(t, blob)
	h, g := c.h, c.g
	gy := (g.NY + uint64(g.Tile[1]) - 1) / uint64(g.Tile[1])
	gx := (g.NX + uint64(g.Tile[2]) - 1) / uint64(g.Tile[2])
	for c, ch := range h.Chunks {
		first, end := g.ChunkTiles(uint64(c))
		at := ch.Offset + 4*(end-first)
		for i := first; i < end; i++ {
			size := uint64(binary.LittleEndian.Uint32(blob[ch.Offset+4*(i-first):]))
			tiles = append(tiles, blob[at:at+size])
			at += size
			iz, iy, ix := i/(gx*gy), i/gx%gy, i%gx
			lz := min(uint64(g.Tile[0]), g.NZ-iz*uint64(g.Tile[0]))
			ly := min(uint64(g.Tile[1]), g.NY-iy*uint64(g.Tile[1]))
			lx := min(uint64(g.Tile[2]), g.NX-ix*uint64(g.Tile[2]))
			ns = append(ns, uint32(lz*ly*lx))
		}
	}
	return tiles, ns
}

// v1Planes are a version-1 tile's 16 bit planes (128 words each) and where
// its code section ends (in words).
func v1Planes(tile []byte) (pl [16][128]uint32, end int) {
	w := func(i int) uint32 { return binary.LittleEndian.Uint32(tile[4*i:]) }
	pm := w(0) & 0xFFFF
	end = 2
	for p := 0; p < 16; p++ {
		if pm>>p&1 == 0 {
			continue
		}
		m := w(end)
		end++
		for k := 0; k < 32; k++ {
			if m>>k&1 != 0 {
				for i := 0; i < 4; i++ {
					pl[p][4*k+i] = w(end)
					end++
				}
			}
		}
	}
	return pl, end
}

// TestEncodeV2Emulated checks the GPU encoder's version-2 code section
// (encode_v2.cuh: tile_layout_v2 and tile_write) without a GPU:
// tools/encode_v2_emu.cpp runs it on the host (32 threads as the warp's
// lanes, AddressSanitizer) on the bit planes of each tile of a CPU
// version-1 container (the codes the GPU's walks leave, escapes 0x8000),
// and each result must be the start of the same tile in the CPU's
// version-2 container: word 0's codes and escape bits, the origin, block
// mask, rates, units, padding and signs; and the rest of the v2 tile must be
// as long as the v1 tile's tail. Tiles with a residual of magnitude exactly
// 32767 (an escape in version 2 only, whose v1 code the walks would not
// leave) are left out and counted.
func TestEncodeV2Emulated(t *testing.T) {
	emu := buildEmu(t, "encode_v2_emu.cpp", "-Wno-unknown-pragmas", "-pthread")
	ctx := context.Background()
	type job struct {
		name string
		raw  []byte
		p    fz.Params
	}
	var jobs []job
	// spikes at ±32766 and ±32768 (not 32767: see above) in full and
	// clipped tiles of each rank
	for si, dims := range [][]uint64{{16, 32, 64}, {12, 20, 40}, {128, 128}, {100, 70}, {16384}, {10000}} {
		v := spikeField(dims, []float64{32766, 32768, -32768, -32766, 0}, uint64(si))
		v32 := make([]float32, len(v))
		for i, x := range v {
			v32[i] = float32(x)
		}
		jobs = append(jobs, job{fmt.Sprintf("spikes %v", dims), f32bytes(v32), fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Abs, Bound: 0.5}})
	}
	// smooth and noisy values, holes, fill and raw values, at three bounds
	r := rand.New(rand.NewPCG(3, 4))
	fill := -9999.0
	for _, dims := range [][]uint64{{9000}, {128, 128}, {70, 100}, {16, 32, 64}, {12, 33, 49}} {
		n, _ := fz.NumElements(dims)
		for vi := 0; vi < 3; vi++ {
			v := make([]float32, n)
			for i := range v {
				x := math.Sin(float64(i)*0.003)*40 + math.Cos(float64(i)*0.0007)*10
				switch vi {
				case 1:
					x += r.NormFloat64() * 3
				case 2:
					switch {
					case i%509 == 3:
						x = math.NaN()
					case i%97 == 5:
						x *= 1e3
					case (i/300)%4 == 1 || i%211 == 0:
						x = fill
					}
				}
				v[i] = float32(x)
			}
			for _, eb := range []float64{1e-2, 1e-3, 1e-4} {
				p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: eb}
				if vi == 2 {
					p.Mode, p.Fill = fz.Abs, &fill
				}
				jobs = append(jobs, job{fmt.Sprintf("values %d %v %g", vi, dims, eb), f32bytes(v), p})
			}
		}
	}
	// real fields, where present
	dir := os.Getenv("FZ_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	for _, f := range []realField{benchFields[5], benchFields[6], benchFields[2], benchFields[9]} {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Logf("%s not found (%v): left out", f.name, err)
			continue
		}
		for _, eb := range []float64{1e-2, 1e-4} {
			jobs = append(jobs, job{fmt.Sprintf("%s %g", f.name, eb), raw, fz.Params{DType: f.dtype, Dims: f.dims, Mode: fz.Rel, Bound: eb, Fill: f.fill}})
		}
	}
	var in bytes.Buffer
	type want struct {
		job      int
		tile     int
		v2       []byte
		tailSize int // bytes after the v1 tile's code section
	}
	var wants []want
	skipped := 0
	for ji, j := range jobs {
		b1, _, err := fz.Compress(ctx, j.raw, j.p, fz.WithFormatVersion(1), fz.WithTilesPerChunk(7))
		if err != nil {
			t.Fatalf("%s: %v", j.name, err)
		}
		b2, _, err := fz.Compress(ctx, j.raw, j.p, fz.WithFormatVersion(2), fz.WithTilesPerChunk(7))
		if err != nil {
			t.Fatalf("%s: %v", j.name, err)
		}
		t1, ns := containerTiles(t, b1)
		t2, _ := containerTiles(t, b2)
		if len(t1) != len(t2) {
			t.Fatalf("%s: %d v1 tiles, %d v2 tiles", j.name, len(t1), len(t2))
		}
		for i, tile := range t1 {
			pl, end := v1Planes(tile)
			top := false // a magnitude of 32767: all 15 magnitude planes set at a slot
			for w := 0; w < 128; w++ {
				a := ^uint32(0)
				for p := 0; p < 15; p++ {
					a &= pl[p][w]
				}
				top = top || a != 0
			}
			if top {
				skipped++
				continue
			}
			var hdr [8]byte
			binary.LittleEndian.PutUint32(hdr[0:], ns[i])
			binary.LittleEndian.PutUint32(hdr[4:], uint32(len(tile)))
			in.Write(hdr[:])
			in.Write(tile)
			wants = append(wants, want{ji, i, t2[i], len(tile) - 4*end})
		}
	}
	got := runEmu(t, emu, in.Bytes())
	units, signs := 0, 0
	for _, w := range wants {
		name := fmt.Sprintf("%s tile %d", jobs[w.job].name, w.tile)
		if len(got) < 4 {
			t.Fatalf("%s: emulator output ends early", name)
		}
		n := int(binary.LittleEndian.Uint32(got))
		if len(got) < 4+n || n < 8 {
			t.Fatalf("%s: emulator record of %d bytes", name, n)
		}
		sec := got[4 : 4+n]
		got = got[4+n:]
		exp := append([]byte(nil), w.v2...)
		if len(exp) < n {
			t.Fatalf("%s: the emulated code section (%d bytes) is longer than the CPU's whole v2 tile (%d)", name, n, len(exp))
		}
		w0 := binary.LittleEndian.Uint32(exp) &^ (1<<17 | 1<<18) // fill, raw: the tail's (not emulated)
		binary.LittleEndian.PutUint32(exp, w0)
		if !bytes.Equal(sec, exp[:n]) {
			i := firstDiff(sec, exp[:n])
			t.Fatalf("%s: emulated GPU v2 code section differs from the CPU's at byte %d of %d (word %d: %#x, CPU %#x)",
				name, i, n, i/4, binary.LittleEndian.Uint32(sec[i&^3:]), binary.LittleEndian.Uint32(exp[i&^3:]))
		}
		if len(w.v2)-n != w.tailSize {
			t.Fatalf("%s: the CPU's v2 tile has %d bytes after the emulated code section, its v1 tile's tail is %d", name, len(w.v2)-n, w.tailSize)
		}
		if n > 8 {
			bm := binary.LittleEndian.Uint32(sec[8:])
			units += n - 12 - 4*bits.OnesCount32(bm)
			signs++
		}
	}
	if len(got) != 0 {
		t.Fatalf("emulator wrote %d bytes more than the tiles", len(got))
	}
	if len(wants) == 0 || signs == 0 {
		t.Fatal("no tile with codes was emulated")
	}
	t.Logf("%d tiles of %d containers: emulated GPU version-2 code sections equal the CPU's (%d with codes, %d bytes of units and signs); %d tiles with a magnitude of 32767 left out",
		len(wants), len(jobs), signs, units, skipped)
}

// TestEncodeV2EmulatedRandomPlanes runs the emulated version-2 writer on
// tiles of random bit planes, whose rate mixes the real fields' tiles rarely
// or never reach (every group at rate 15: 1920 words of units; sparse
// blocks; odd unit counts at every lane boundary), each checked against the
// emulator's plain model of the code section (rates, group-major units,
// padding, signs), with the plane buffer's pad words (the park state)
// untouched.
func TestEncodeV2EmulatedRandomPlanes(t *testing.T) {
	emu := buildEmu(t, "encode_v2_emu.cpp", "-Wno-unknown-pragmas", "-pthread")
	out, err := exec.Command(emu, "random", "1200", "20261125").CombinedOutput()
	if err != nil {
		t.Fatalf("encode_v2_emu random: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}
