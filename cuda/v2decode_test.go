package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
)

// Container version 2 on the GPU decoder (transcode.cuh): identity with the
// CPU decoder on v2 streams the CPU writes, and agreement on corrupt ones —
// random damage and one case per reject rule of the v2 code section.

// v2Blob compresses with the CPU codec in version 2, or skips the test when
// this build of fz does not write it yet.
func v2Blob(t *testing.T, raw []byte, p fz.Params, opts ...fz.Option) []byte {
	t.Helper()
	blob, _, err := fz.Compress(context.Background(), raw, p, append(opts, fz.WithFormatVersion(2))...)
	if err != nil {
		t.Fatalf("CPU compress, version 2: %v", err)
	}
	h, err := fz.ReadHeader(blob)
	if err != nil {
		t.Fatalf("CPU v2 container: %v", err)
	}
	if h.Version != 2 {
		t.Fatalf("fz.WithFormatVersion(2) wrote version %d", h.Version)
	}
	return blob
}

// escapeEdges: integer values under ABS 0.5 (step 1, q = x), so the 1-D
// residuals are the chosen d: both sides of the v2 escape threshold (32766
// coded, 32767 and 32768 escaped; v1 escapes from 32768 on), rate-15 groups
// with and without escapes, small and zero residuals.
func escapeEdges(n int) []float64 {
	pat := []float64{32766, -32766, 32767, -32767, 32768, -32768, 0, 3, -3, 16383, -16383, 1, -1, 0, 0, 0}
	v := make([]float64, n)
	for i := 1; i < n; i++ {
		v[i] = v[i-1] + pat[(i*7+i/4096)%len(pat)]
	}
	return v
}

// TestV2DecodeMatchesCPU: every walk of the decoders behind the v2
// transcode (full and clipped tiles of the three ranks; escapes at the v2
// threshold, fill and raw masks; f32 and f64) decodes a CPU v2 stream as
// the CPU does, and to the values of the v1 stream of the same field.
// Small enough for compute-sanitizer.
func TestV2DecodeMatchesCPU(t *testing.T) {
	g := gpu(t)
	ctx := context.Background()
	fill := -9999.0
	variants := []struct {
		name  string
		mode  fz.Mode
		bound float64
		fill  *float64
		val   func(i int, x float64) float64
	}{
		{"smooth", fz.Rel, 1e-3, nil, func(i int, x float64) float64 { return x }},
		{"spikes", fz.Abs, 1e-3, nil, func(i int, x float64) float64 {
			switch {
			case i%509 == 3:
				return math.NaN()
			case i%97 == 5:
				return x * 1e3
			}
			return x
		}},
		{"fill", fz.Abs, 1e-3, &fill, func(i int, x float64) float64 {
			if (i/300)%4 == 1 || i%211 == 0 {
				return fill
			}
			if i%401 == 9 {
				return x * 1e3
			}
			return x
		}},
		{"zeros", fz.Abs, 1e-3, nil, func(i int, x float64) float64 { return 0 }},
	}
	shapes := [][]uint64{{9000}, {128, 128}, {70, 100}, {16, 32, 64}, {12, 33, 49}, {16, 33, 49}}
	if os.Getenv("FZ_GPU_SHORT") != "" {
		shapes = [][]uint64{{9000}, {70, 100}, {12, 33, 49}}
	}
	cases := 0
	for _, dims := range shapes {
		n, err := fz.NumElements(dims)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			v64 := make([]float64, n)
			for i := range v64 {
				v64[i] = v.val(i, math.Sin(float64(i)*0.003)*40+math.Cos(float64(i)*0.0007)*10)
			}
			for _, dt := range []fz.DType{fz.Float32, fz.Float64} {
				p := fz.Params{DType: dt, Dims: dims, Mode: v.mode, Bound: v.bound, Fill: v.fill}
				v2DecodeCheck(t, ctx, g, fmt.Sprintf("%s %v %v", v.name, dims, dt), floatBytes(dt, v64), p)
				cases++
			}
		}
	}
	// the escape threshold, in every rank
	for _, dims := range [][]uint64{{9000}, {70, 100}, {12, 33, 49}} {
		n, _ := fz.NumElements(dims)
		for _, dt := range []fz.DType{fz.Float32, fz.Float64} {
			p := fz.Params{DType: dt, Dims: dims, Mode: fz.Abs, Bound: 0.5}
			v2DecodeCheck(t, ctx, g, fmt.Sprintf("escape edges %v %v", dims, dt), floatBytes(dt, escapeEdges(int(n))), p)
			cases++
		}
	}
	t.Logf("%d v2 streams decode on the GPU as on the CPU", cases)
}

// TestV2DecodeJobs: a backend whose jobs hold 7 tiles (2 chunks of 3)
// decodes v2 fields in several jobs, the last one short: each job's v1
// copies are placed from its own first chunk's offset (transcode.cuh), and
// the context's v2 buffer grows between the fields (the second one's
// chunks are longer). Then damaged streams of both, decoded in jobs, are
// rejected or accepted as the CPU does.
func TestV2DecodeJobs(t *testing.T) {
	gpu(t)
	g, err := OpenDevice(0, 7)
	if err != nil {
		t.Fatalf("GPU backend with 7-tile jobs: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	var blobs [][]byte
	var lens []int
	for _, c := range []struct {
		dims  []uint64
		dt    fz.DType
		bound float64
	}{{[]uint64{13 * 4096}, fz.Float32, 1e-2}, {[]uint64{40, 64, 96}, fz.Float64, 1e-5}} {
		n, _ := fz.NumElements(c.dims)
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Sin(float64(i)*0.003)*40 + math.Cos(float64(i)*0.0007)*10 + r.NormFloat64()*0.01
		}
		raw := floatBytes(c.dt, v)
		p := fz.Params{DType: c.dt, Dims: c.dims, Mode: fz.Rel, Bound: c.bound}
		v2DecodeCheck(t, ctx, g, fmt.Sprintf("jobs of 7 tiles %v %v", c.dims, c.dt), raw, p)
		blobs = append(blobs, v2Blob(t, raw, p, fz.WithTilesPerChunk(3)))
		lens = append(lens, len(raw))
	}
	ok, bad := 0, 0
	for trial := 0; trial < 60; trial++ {
		k := trial % len(blobs)
		m := append([]byte(nil), blobs[k]...)
		h, err := fz.ReadHeader(m)
		if err != nil {
			t.Fatal(err)
		}
		ch := h.Chunks[r.IntN(len(h.Chunks))]
		for j := 0; j < 1+r.IntN(3); j++ {
			m[ch.Offset+uint64(r.IntN(int(ch.Size)))] ^= byte(1 << r.IntN(8))
		}
		resealChunks(h, m)
		if decodeAgree(t, ctx, g, fmt.Sprintf("jobs of 7 tiles, field %d, trial %d", k, trial), m, lens[k]) {
			ok++
		} else {
			bad++
		}
	}
	t.Logf("damaged streams in 7-tile jobs: %d accepted alike, %d rejected by both", ok, bad)
}

func floatBytes(dt fz.DType, v []float64) []byte {
	if dt == fz.Float64 {
		return f64bytes(v)
	}
	v32 := make([]float32, len(v))
	for i, x := range v {
		v32[i] = float32(x)
	}
	return f32bytes(v32)
}

// v2DecodeCheck: the CPU's v2 stream of raw decodes on the GPU to the CPU's
// bytes, which equal the v1 stream's decoded bytes.
func v2DecodeCheck(t *testing.T, ctx context.Context, g *Backend, name string, raw []byte, p fz.Params) {
	t.Helper()
	opts := []fz.Option{fz.WithTilesPerChunk(3)}
	blob := v2Blob(t, raw, p, opts...)
	_, gout := decodeSame(t, ctx, g, name+" (v2)", blob)
	b1, _, err := fz.Compress(ctx, raw, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	_, out1, err := fz.Decompress(ctx, b1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out1, gout) {
		t.Fatalf("%s: v2 decodes differently from v1 at byte %d", name, firstDiff(out1, gout))
	}
}

// TestV2CorruptedAgree: TestCorruptedAgree on v2 streams.
func TestV2CorruptedAgree(t *testing.T) {
	g := gpu(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	v := noisyField[float64](r, 70000)
	w := spikesAndFill(v)
	fill := -9999.0
	trials := 100 // 3600 streams in all, as many as TestCorruptedAgree's
	if os.Getenv("FZ_GPU_SHORT") != "" {
		trials = 15
	}
	type dataset struct {
		name string
		v    []float64
		fill *float64
		mode fz.Mode
	}
	for _, ds := range []dataset{{"noisy", v, nil, fz.Rel}, {"spikes+fill", w, &fill, fz.Abs}, {"escape edges", escapeEdges(len(v)), nil, fz.Abs}} {
		for _, dims := range [][]uint64{{70000}, {70, 1000}, {7, 100, 100}, {16, 32, 128}, {128, 128}, {16, 33, 49}} {
			for _, dt := range []fz.DType{fz.Float32, fz.Float64} {
				n, err := fz.NumElements(dims)
				if err != nil {
					t.Fatal(err)
				}
				bound := 1e-3
				if ds.name == "escape edges" {
					bound = 0.5
				}
				raw := floatBytes(dt, ds.v[:n])
				blob := v2Blob(t, raw, fz.Params{DType: dt, Dims: dims, Mode: ds.mode, Bound: bound, Fill: ds.fill}, fz.WithTilesPerChunk(4))
				h, err := fz.ReadHeader(blob)
				if err != nil {
					t.Fatal(err)
				}
				ok, bad := 0, 0
				for trial := 0; trial < trials; trial++ {
					m := flipInChunk(r, h, blob)
					name := fmt.Sprintf("%s %v %v trial %d", ds.name, dims, dt, trial)
					if decodeAgree(t, ctx, g, name, m, len(raw)) {
						ok++
					} else {
						bad++
					}
				}
				t.Logf("%s %v %v: %d corrupted v2 streams accepted alike, %d rejected by both", ds.name, dims, dt, ok, bad)
			}
		}
	}
}

// ---- a model of the v2 tile (PLAN4 / docs/FORMAT.md version 2), to build
// tiles that break exactly one rule.

type v2Tile struct {
	w0, origin uint32
	bmask      uint32     // code block mask as written
	rates      [256]uint8 // group rates as written (groups of unlisted blocks are not written)
	mag        [4096]uint16
	neg        [4096]bool // sign of the slots with a magnitude
	pad        uint16     // the padding unit (written when the unit count is odd)
	signExtra  uint32     // ORed into the last sign word
	tail       []byte
}

// parseV2Tile reads a tile written by the CPU codec.
func parseV2Tile(b []byte) (*v2Tile, error) {
	le := binary.LittleEndian
	if len(b) < 8 {
		return nil, fmt.Errorf("tile of %d bytes", len(b))
	}
	tl := &v2Tile{w0: le.Uint32(b), origin: le.Uint32(b[4:])}
	at := 8
	if tl.w0&1 != 0 {
		tl.bmask = le.Uint32(b[at:])
		at += 4
		for k := 0; k < 32; k++ {
			if tl.bmask>>k&1 != 0 {
				rw := le.Uint32(b[at:])
				at += 4
				for j := 0; j < 8; j++ {
					tl.rates[8*k+j] = uint8(rw >> (4 * j) & 15)
				}
			}
		}
		units := 0
		for gi := 0; gi < 256; gi++ {
			for p := 0; p < int(tl.rates[gi]); p++ {
				u := le.Uint16(b[at+2*units:])
				units++
				for j := 0; j < 16; j++ {
					tl.mag[16*gi+j] |= (u >> j & 1) << p
				}
			}
		}
		if units%2 == 1 {
			tl.pad = le.Uint16(b[at+2*units:])
			units++
		}
		at += 2 * units
		k := 0
		for s := 0; s < 4096; s++ {
			if tl.mag[s] != 0 {
				tl.neg[s] = le.Uint32(b[at+4*(k/32):])>>(k%32)&1 != 0
				k++
			}
		}
		at += 4 * ((k + 31) / 32)
	}
	if at > len(b) {
		return nil, fmt.Errorf("tile sections end at %d, past its %d bytes", at, len(b))
	}
	tl.tail = append([]byte(nil), b[at:]...)
	return tl, nil
}

// encode writes the tile as its fields say: the rates as written (not
// derived), the magnitude bits below each group's rate, a sign for each
// magnitude that is non-zero after that cut.
func (tl *v2Tile) encode() []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, tl.w0)
	b = le.AppendUint32(b, tl.origin)
	if tl.w0&1 != 0 {
		b = le.AppendUint32(b, tl.bmask)
		for k := 0; k < 32; k++ {
			if tl.bmask>>k&1 != 0 {
				var rw uint32
				for j := 0; j < 8; j++ {
					rw |= uint32(tl.rates[8*k+j]) << (4 * j)
				}
				b = le.AppendUint32(b, rw)
			}
		}
		var mags [4096]uint16
		units := 0
		for gi := 0; gi < 256; gi++ {
			if tl.bmask>>(gi/8)&1 == 0 {
				continue
			}
			r := int(tl.rates[gi])
			for p := 0; p < r; p++ {
				var u uint16
				for j := 0; j < 16; j++ {
					u |= (tl.mag[16*gi+j] >> p & 1) << j
				}
				b = le.AppendUint16(b, u)
				units++
			}
			for j := 0; j < 16; j++ {
				mags[16*gi+j] = tl.mag[16*gi+j] & uint16(1<<r-1)
			}
		}
		if units%2 == 1 {
			b = le.AppendUint16(b, tl.pad)
		}
		var words []uint32
		k := 0
		for s := 0; s < 4096; s++ {
			if mags[s] != 0 {
				if k%32 == 0 {
					words = append(words, 0)
				}
				if tl.neg[s] {
					words[k/32] |= 1 << (k % 32)
				}
				k++
			}
		}
		if len(words) > 0 {
			words[len(words)-1] |= tl.signExtra
		}
		for _, w := range words {
			b = le.AppendUint32(b, w)
		}
	}
	return append(b, tl.tail...)
}

// v2Container gives access to the tiles of a container and rebuilds it
// with one tile replaced (tile table, chunk index and checksums follow).
type v2Container struct {
	h    *fz.Header
	g    fz.Geometry
	blob []byte
}

// openContainer reads blob's header and geometry (the test fails on an
// error: the blobs come from the CPU codec).
func openContainer(t *testing.T, blob []byte) *v2Container {
	t.Helper()
	h, err := fz.ReadHeader(blob)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Geometry()
	if err != nil {
		t.Fatal(err)
	}
	return &v2Container{h, g, blob}
}

func (c *v2Container) tileN(t uint64) int {
	g := c.g
	gx := (g.NX + uint64(g.Tile[2]) - 1) / uint64(g.Tile[2])
	gy := (g.NY + uint64(g.Tile[1]) - 1) / uint64(g.Tile[1])
	ix, iy, iz := t%gx, t/gx%gy, t/(gx*gy)
	ext := func(n, i uint64, te int) int { return int(min(uint64(te), n-i*uint64(te))) }
	return ext(g.NZ, iz, g.Tile[0]) * ext(g.NY, iy, g.Tile[1]) * ext(g.NX, ix, g.Tile[2])
}

// tiles returns the byte ranges of chunk ch's tiles.
func (c *v2Container) tiles(ch int) [][2]uint64 {
	first, end := c.g.ChunkTiles(uint64(ch))
	k := end - first
	base := c.h.Chunks[ch].Offset
	at := base + 4*k
	var out [][2]uint64
	for i := uint64(0); i < k; i++ {
		sz := uint64(binary.LittleEndian.Uint32(c.blob[base+4*i:]))
		out = append(out, [2]uint64{at, at + sz})
		at += sz
	}
	return out
}

// replace is the container with tile ti of chunk ch replaced.
func (c *v2Container) replace(ch, ti int, tile []byte) []byte {
	tiles := make([][][]byte, len(c.h.Chunks))
	for i := range tiles {
		for j, r := range c.tiles(i) {
			if i == ch && j == ti {
				tiles[i] = append(tiles[i], tile)
			} else {
				tiles[i] = append(tiles[i], c.blob[r[0]:r[1]])
			}
		}
	}
	return c.assemble(c.h.Version, tiles)
}

// assemble is the container with c's header (its version field set to
// version) and the given tiles per chunk (FORMAT.md §6: each chunk a size
// table and its tiles), with the index and every checksum written anew.
func (c *v2Container) assemble(version uint16, tiles [][][]byte) []byte {
	le := binary.LittleEndian
	io := c.h.IndexOffset()
	out := append([]byte(nil), c.blob[:c.h.HeaderSize]...)
	if version != c.h.Version {
		le.PutUint16(out[4:], version)
		le.PutUint32(out[io-4:], fz.CRC32C(out[:io-4]))
	}
	for i := range c.h.Chunks {
		start := uint64(len(out))
		for _, tl := range tiles[i] {
			out = le.AppendUint32(out, uint32(len(tl)))
		}
		for _, tl := range tiles[i] {
			out = append(out, tl...)
		}
		e := io + uint64(24*i)
		le.PutUint64(out[e:], start)
		le.PutUint64(out[e+8:], uint64(len(out))-start)
		le.PutUint32(out[e+16:], fz.CRC32C(out[start:]))
	}
	ie := io + uint64(24*len(c.h.Chunks))
	le.PutUint32(out[ie:], fz.CRC32C(out[io:ie]))
	return out
}

type v2Case struct {
	name   string
	blob   []byte
	reject bool // every decoder must reject it (else: both agree)
	rawLen int
}

// v2RuleCases: per container (fields with escapes, fill, raw values,
// clipped tiles whose last group is partly past n), the re-encoded tiles
// must be the CPU's bytes (the model is right), and one tile per rule is
// rebuilt breaking that rule alone where the format allows it.
func v2RuleCases(t *testing.T) []v2Case {
	t.Helper()
	fill := -9999.0
	var out []v2Case
	type field struct {
		name string
		dims []uint64
		dt   fz.DType
		v    []float64
		p    fz.Params
	}
	mk := func(n int, f func(i int) float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	spiky := func(i int) float64 {
		x := math.Sin(float64(i)*0.003)*40 + math.Cos(float64(i)*0.0007)*10
		switch {
		case i%509 == 3:
			return math.NaN()
		case i%97 == 5:
			return x * 1e3
		case (i/300)%4 == 1:
			return fill
		}
		return x
	}
	fields := []field{
		{"edges 1d", []uint64{9000}, fz.Float32, escapeEdges(9000), fz.Params{Mode: fz.Abs, Bound: 0.5}},
		{"spiky 3d clipped", []uint64{16, 33, 49}, fz.Float64, mk(16*33*49, spiky), fz.Params{Mode: fz.Abs, Bound: 1e-3, Fill: &fill}},
		{"spiky 2d", []uint64{70, 100}, fz.Float32, mk(7000, spiky), fz.Params{Mode: fz.Abs, Bound: 1e-3, Fill: &fill}},
	}
	for _, f := range fields {
		p := f.p
		p.DType, p.Dims = f.dt, f.dims
		raw := floatBytes(f.dt, f.v)
		blob := v2Blob(t, raw, p, fz.WithTilesPerChunk(3))
		c := openContainer(t, blob)
		h, g := c.h, c.g
		type tileRef struct {
			ch, ti int
			t      uint64
			tl     *v2Tile
		}
		var refs []tileRef
		for ch := range h.Chunks {
			first, _ := g.ChunkTiles(uint64(ch))
			for ti, r := range c.tiles(ch) {
				b := blob[r[0]:r[1]]
				tl, err := parseV2Tile(b)
				if err != nil {
					t.Fatalf("%s chunk %d tile %d: %v", f.name, ch, ti, err)
				}
				if e := tl.encode(); !bytes.Equal(e, b) {
					t.Fatalf("%s chunk %d tile %d: the test's v2 model re-encodes the CPU's tile differently (byte %d of %d)", f.name, ch, ti, firstDiff(b, e), len(b))
				}
				refs = append(refs, tileRef{ch, ti, first + uint64(ti), tl})
			}
		}
		add := func(name string, reject bool, ref tileRef, mut func(tl *v2Tile) bool) {
			cp := *ref.tl
			cp.tail = append([]byte(nil), ref.tl.tail...)
			if !mut(&cp) {
				return
			}
			out = append(out, v2Case{fmt.Sprintf("%s: %s (chunk %d tile %d)", f.name, name, ref.ch, ref.ti), c.replace(ref.ch, ref.ti, cp.encode()), reject, len(raw)})
		}
		// the first tile with codes that a predicate accepts
		find := func(ok func(r tileRef) bool) (tileRef, bool) {
			for _, r := range refs {
				if r.tl.w0&1 != 0 && ok(r) {
					return r, true
				}
			}
			return tileRef{}, false
		}
		units := func(tl *v2Tile) (w int) {
			for gi := 0; gi < 256; gi++ {
				if tl.bmask>>(gi/8)&1 != 0 {
					w += int(tl.rates[gi])
				}
			}
			return w
		}
		nonzero := func(tl *v2Tile) (k int) {
			for _, m := range tl.mag {
				if m != 0 {
					k++
				}
			}
			return k
		}
		if r, ok := find(func(tileRef) bool { return true }); ok {
			for _, bit := range []uint{1, 15, 19, 31} {
				add(fmt.Sprintf("word0 bit %d", bit), true, r, func(tl *v2Tile) bool { tl.w0 |= 1 << bit; return true })
			}
			add("block mask 0", true, r, func(tl *v2Tile) bool { tl.bmask = 0; return true })
			add("codes bit cleared", false, r, func(tl *v2Tile) bool { tl.w0 &^= 1; return true })
			add("trailing bytes", true, r, func(tl *v2Tile) bool { tl.tail = append(tl.tail, 0, 0, 0, 0); return true })
			add("origin changed", false, r, func(tl *v2Tile) bool { tl.origin += 3; return true })
			add("slot 0 magnitude", true, r, func(tl *v2Tile) bool {
				tl.bmask |= 1
				if tl.rates[0] == 0 {
					tl.rates[0] = 1
				}
				tl.mag[0] |= 1
				return true
			})
			add("listed block with rate word 0", true, r, func(tl *v2Tile) bool {
				n := c.tileN(r.t)
				for k := 0; 128*k < n; k++ {
					if tl.bmask>>k&1 == 0 {
						tl.bmask |= 1 << k
						return true
					}
				}
				return false
			})
			add("top unit 0", true, r, func(tl *v2Tile) bool {
				for gi := 0; gi < 256; gi++ {
					if tl.bmask>>(gi/8)&1 != 0 && tl.rates[gi] > 0 && tl.rates[gi] < 15 {
						tl.rates[gi]++
						return true
					}
				}
				return false
			})
			add("a sign flipped", false, r, func(tl *v2Tile) bool {
				for s := 1; s < 4096; s++ {
					if tl.mag[s] != 0 && tl.mag[s] != 32767 {
						tl.neg[s] = !tl.neg[s]
						return true
					}
				}
				return false
			})
		}
		if r, ok := find(func(r tileRef) bool { return units(r.tl)%2 == 1 }); ok {
			add("padding unit not 0", true, r, func(tl *v2Tile) bool { tl.pad = 0x100; return true })
		}
		if r, ok := find(func(r tileRef) bool { return nonzero(r.tl)%32 != 0 }); ok {
			add("unused sign bit", true, r, func(tl *v2Tile) bool { tl.signExtra = 1 << 31; return true })
		}
		if r, ok := find(func(r tileRef) bool {
			n := c.tileN(r.t)
			return n%16 != 0 && r.tl.bmask>>((n-1)/128)&1 != 0
		}); ok {
			n := c.tileN(r.t)
			add("magnitude on a slot past n", true, r, func(tl *v2Tile) bool {
				if tl.rates[(n-1)/16] == 0 {
					tl.rates[(n-1)/16] = 1
				}
				tl.mag[n] = 1
				return true
			})
		}
		if r, ok := find(func(r tileRef) bool { return c.tileN(r.t) < 4096-128 }); ok {
			n := c.tileN(r.t)
			add("rate on a group past n", true, r, func(tl *v2Tile) bool {
				gi := (n + 15) / 16
				tl.bmask |= 1 << (gi / 8)
				tl.rates[gi] = 1
				tl.mag[16*gi] = 1
				return true
			})
		}
		esc := func(r tileRef) bool {
			for _, m := range r.tl.mag {
				if m == 32767 {
					return true
				}
			}
			return false
		}
		if r, ok := find(esc); ok {
			add("escape with sign 1", true, r, func(tl *v2Tile) bool {
				for s, m := range tl.mag {
					if m == 32767 {
						tl.neg[s] = true
						return true
					}
				}
				return false
			})
			add("escape turned into 32766", true, r, func(tl *v2Tile) bool {
				for s, m := range tl.mag {
					if m == 32767 {
						tl.mag[s] = 32766
						return true
					}
				}
				return false
			})
		}
		if r, ok := find(func(r tileRef) bool { return r.tl.w0&(1<<16) == 0 }); ok {
			add("escape added without its value", true, r, func(tl *v2Tile) bool {
				for gi := 1; gi < 256 && 16*gi < c.tileN(r.t); gi++ {
					if tl.bmask>>(gi/8)&1 != 0 {
						tl.rates[gi] = 15
						tl.mag[16*gi] = 32767
						tl.neg[16*gi] = false
						return true
					}
				}
				return false
			})
		}
	}
	return out
}

// TestV2RuleCasesCPU: the CPU decoder rejects every rule case (and the
// test's tile model writes the CPU's bytes). No GPU needed.
func TestV2RuleCasesCPU(t *testing.T) {
	if _, _, err := fz.Compress(context.Background(), make([]byte, 4), fz.Params{DType: fz.Float32, Dims: []uint64{1}, Mode: fz.Abs, Bound: 1}, fz.WithFormatVersion(2)); err != nil {
		skiplog.Skipf(t, "SKIP: this fz does not write container version 2 yet: %v", err)
	}
	cases := v2RuleCases(t)
	strict := 0
	for _, c := range cases {
		_, _, err := fz.Decompress(context.Background(), c.blob)
		if c.reject {
			strict++
			if err == nil {
				t.Errorf("%s: the CPU decoder accepts it", c.name)
			}
		}
	}
	if strict < 20 {
		t.Errorf("only %d reject cases built: the fields lost the tiles the rules need", strict)
	}
	t.Logf("%d rule cases (%d must be rejected) built", len(cases), strict)
}

// TestV2RuleCasesAgree: the GPU rejects what each rule case breaks, and
// agrees with the CPU on the rest.
func TestV2RuleCasesAgree(t *testing.T) {
	g := gpu(t)
	ctx := context.Background()
	for _, c := range v2RuleCases(t) {
		ok := decodeAgree(t, ctx, g, c.name, c.blob, c.rawLen)
		if c.reject && ok {
			t.Errorf("%s: accepted by both decoders", c.name)
		}
		if !ok {
			gout := make([]byte, c.rawLen)
			_, err := g.DecompressTo(ctx, c.blob, gout)
			t.Logf("%s: %v", c.name, err)
		}
	}
}
