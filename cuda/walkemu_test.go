package cuda

import (
	"context"
	"encoding/binary"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// What the tests of the staged f32 walks' host emulations
// (TestEncodeRank2Emulated: tools/encode_rank2_emu.cpp,
// TestEncodeRank3Emulated: tools/encode_rank3_emu.cpp) share: the CPU's
// version-1 tiles read as the walks' expectations, the check of FORMAT.md
// section 4, the emulators' output records and their comparison.

// walkLayout is what differs between the ranks' tiles of 4096 elements
// (element e in C order inside the tile): each element's slot in the code
// planes, the group of elements whose largest |d| picks a coder (a segment
// of rank 2, a z-plane of rank 3; 8 per tile), and how a word of the plane
// buffer and of an element-order bitmap is described in a message.
type walkLayout struct {
	slot       func(e int) int
	group      func(e int) int
	planeWord  func(i int) string // word i of a plane
	bitmapWord func(i int) string // word i of an element-order bitmap (elements 32i to 32i + 31)
}

// sharedField is the contents of a real field's file in the shared data
// (FZ_SHARED_DATA, else ../../shared/data), or nil (logged) where it is not
// there.
func sharedField(t *testing.T, f realField) []byte {
	dir := os.Getenv("FZ_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	raw, err := os.ReadFile(filepath.Join(dir, f.name))
	if err != nil {
		t.Logf("%s not found (%v): left out", f.name, err)
		return nil
	}
	return raw
}

// v1Field is the CPU's version-1 container of a field (its tiles) and the
// parameters it records, which the emulators' walks are given.
type v1Field struct {
	tiles         [][]byte
	eb, step, inv float64
	hasFill       bool
	fillBits      uint32
}

// compressV1 compresses the f32 values v with p into a version-1 container.
func compressV1(t *testing.T, name string, v []float32, p fz.Params, opts ...fz.Option) v1Field {
	t.Helper()
	blob, _, err := fz.Compress(context.Background(), f32bytes(v), p, append([]fz.Option{fz.WithFormatVersion(1)}, opts...)...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	le := binary.LittleEndian
	c := v1Field{eb: math.Float64frombits(le.Uint64(blob[40:])), step: math.Float64frombits(le.Uint64(blob[48:])),
		hasFill: blob[11]&1 != 0, fillBits: le.Uint32(blob[56:])}
	c.inv = 1 / c.step
	c.tiles, _ = containerTiles(t, blob)
	return c
}

// putSteps writes inv, step and eb (f64 each) to b, as the emulators' record
// headers hold them.
func (c *v1Field) putSteps(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], math.Float64bits(c.inv))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(c.step))
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(c.eb))
}

// quantize is x's s and q (FORMAT.md section 4, each step rounded on its
// own); q only for |s| < 2^28.
func quantize(x float32, inv float64) (s, q float64) {
	s = float64(float64(x) * inv)
	q = float64(float64(s+6755399441055744.0) - 6755399441055744.0)
	return s, q
}

// checkErr is the error of x's reconstruction from q, which the check
// compares with eb (x is raw unless it is <= eb).
func checkErr(x float32, q, step float64) float64 {
	xr := float32(float64(q * step))
	return math.Abs(float64(x) - float64(xr))
}

// v1Tile is what a CPU version-1 tile (a full one) holds.
type v1Tile struct {
	origin int32
	planes [16][128]uint32
	esc    []int32  // the escapes' residuals, in their order
	fill   bool     // the tile has a fill mask
	raw    []uint32 // the raw values' bits, in their order
}

func parseV1Tile(tile []byte) v1Tile {
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(tile[4*i:]) }
	w0 := word(0)
	ct := v1Tile{origin: int32(word(1))}
	var end int
	ct.planes, end = v1Planes(tile)
	if w0>>16&1 != 0 {
		m := int(word(end))
		for i := range m {
			ct.esc = append(ct.esc, int32(word(end+1+i)))
		}
		end += 1 + m
	}
	if w0>>17&1 != 0 {
		ct.fill = true
		end += 1 + 4*bits.OnesCount32(word(end))
	}
	if w0>>18&1 != 0 {
		end += 1 + 4*bits.OnesCount32(word(end))
		for i := range int(word(end)) {
			ct.raw = append(ct.raw, word(end+1+i))
		}
	}
	return ct
}

// elementCodes are the tile's version-1 codes by element and its escapes'
// residuals by element (the codes 0x8000 in element order take the escape
// list in its order).
func elementCodes(t *testing.T, name string, ct *v1Tile, lay walkLayout) (codes [4096]uint32, esc map[int]int32) {
	t.Helper()
	esc = map[int]int32{}
	next := 0
	for e := range 4096 {
		s := lay.slot(e)
		c := uint32(0)
		for p := range 16 {
			c |= (ct.planes[p][s/32] >> (s % 32) & 1) << p
		}
		codes[e] = c
		if c == 0x8000 {
			if next >= len(ct.esc) {
				t.Fatalf("%s: more 0x8000 codes than escapes in the CPU tile", name)
			}
			esc[e] = ct.esc[next]
			next++
		}
	}
	if next != len(ct.esc) {
		t.Fatalf("%s: %d escapes in the CPU tile, %d codes 0x8000", name, len(ct.esc), next)
	}
	return codes, esc
}

// walkExp is what version V's walk leaves of a tile's codes: the planes
// (every escape coded 0x8000), the escapes in element order, and per group
// the largest |d| (element 0 left out; 32768 for an escape).
type walkExp struct {
	planes   [16][128]uint32
	escE     []int // escaped elements, in order
	escD     []int32
	groupMax [8]uint32
	v2only   int // escapes of magnitude 32767 (version 2)
}

// walkCodes derives version V's walkExp from the version-1 codes and escapes
// by element: version 2 (esc_max(2) = 32766) escapes a residual of ±32767
// too, which version 1 codes (FORMAT.md section 4).
func walkCodes(codes *[4096]uint32, esc map[int]int32, V int, lay walkLayout) walkExp {
	var w walkExp
	out := *codes
	for e := 1; e < 4096; e++ {
		c := codes[e]
		mag := c & 0x7FFF
		switch {
		case c == 0x8000:
			w.escE = append(w.escE, e)
			w.escD = append(w.escD, esc[e])
			mag = 32768
		case V == 2 && mag == 32767:
			d := int32(32767)
			if c&0x8000 != 0 {
				d = -d
			}
			w.escE = append(w.escE, e)
			w.escD = append(w.escD, d)
			out[e] = 0x8000
			w.v2only++
			mag = 32768
		}
		g := lay.group(e)
		w.groupMax[g] = max(w.groupMax[g], mag)
	}
	for e := range 4096 {
		s := lay.slot(e)
		for p := range 16 {
			w.planes[p][s/32] |= (out[e] >> p & 1) << (s % 32)
		}
	}
	return w
}

// coderClass is the coder a group's largest |d| m picks: 0 to 3 for 2, 4, 8
// and 16 bits.
func coderClass(m uint32) int {
	switch {
	case m <= 1:
		return 0
	case m <= 7:
		return 1
	case m <= 127:
		return 2
	}
	return 3
}

// tileCheck is what a walked tile must give from the check of FORMAT.md
// section 4 and the CPU tile's origin.
type tileCheck struct {
	origin int32
	raw    [128]uint32 // element-order raw bitmap
	nraw   int
	merr   float64 // the largest check error of the values that are not raw (nor fill)
}

// emuOut reads an emulator's output, u32 by u32.
type emuOut struct {
	t *testing.T
	b []byte
}

func (o *emuOut) u32() uint32 {
	if len(o.b) < 4 {
		o.t.Fatal("emulator output ends early")
	}
	v := binary.LittleEndian.Uint32(o.b)
	o.b = o.b[4:]
	return v
}

func (o *emuOut) words(w []uint32) {
	for i := range w {
		w[i] = o.u32()
	}
}

// end fails the test if the emulator wrote more than was read.
func (o *emuOut) end() {
	if len(o.b) != 0 {
		o.t.Fatalf("emulator wrote %d bytes more than the tiles", len(o.b))
	}
}

// walkRec is the part of a walked tile's record the emulators share.
type walkRec struct {
	origin     int32
	nesc, nraw int
	nfill      int // with withFill only
	merr       float32
	planes     [16][128]uint32
	sraw, sesc [128]uint32
	esc        []int32
}

// walk reads i32 origin, u32 nesc, u32 nraw, (withFill: u32 nfill,) u32
// merr (f32 bits), the 16 planes x 128 words, the 128 sraw words, the 128
// sesc words and the nesc escape residuals.
func (o *emuOut) walk(withFill bool) walkRec {
	var r walkRec
	r.origin, r.nesc, r.nraw = int32(o.u32()), int(o.u32()), int(o.u32())
	if withFill {
		r.nfill = int(o.u32())
	}
	r.merr = math.Float32frombits(o.u32())
	for p := range r.planes {
		o.words(r.planes[p][:])
	}
	o.words(r.sraw[:])
	o.words(r.sesc[:])
	r.esc = make([]int32, r.nesc)
	for i := range r.esc {
		r.esc[i] = int32(o.u32())
	}
	return r
}

// firstDiffWord is the first word where two bitmaps differ (they must).
func firstDiffWord(a, b *[128]uint32) int {
	i := 0
	for a[i] == b[i] {
		i++
	}
	return i
}

// checkWalkTile compares what a walk left (r) with what the CPU tile and the
// check give: the origin, the planes, the escape count and list, the
// element-order escape bitmap (exactly the listed elements), the raw count
// and bitmap, and merr.
func checkWalkTile(t *testing.T, name string, r *walkRec, tc *tileCheck, w *walkExp, lay walkLayout) {
	t.Helper()
	if r.origin != tc.origin {
		t.Errorf("%s: origin %d, CPU %d", name, r.origin, tc.origin)
	}
	for p := range 16 {
		for i := range 128 {
			if r.planes[p][i] != w.planes[p][i] {
				t.Fatalf("%s: plane %d word %d (%s) is %#08x, CPU %#08x", name, p, i, lay.planeWord(i), r.planes[p][i], w.planes[p][i])
			}
		}
	}
	if r.nesc != len(w.escE) {
		t.Fatalf("%s: %d escapes, CPU %d", name, r.nesc, len(w.escE))
	}
	var wesc [128]uint32
	for i, e := range w.escE {
		wesc[e/32] |= 1 << (e % 32)
		if r.esc[i] != w.escD[i] {
			t.Fatalf("%s: escape %d (element %d) is %d, CPU %d", name, i, e, r.esc[i], w.escD[i])
		}
	}
	if r.sesc != wesc {
		i := firstDiffWord(&r.sesc, &wesc)
		t.Fatalf("%s: escape bitmap word %d (%s) is %#08x, want %#08x", name, i, lay.bitmapWord(i), r.sesc[i], wesc[i])
	}
	if r.nraw != tc.nraw {
		t.Fatalf("%s: %d raw values, want %d", name, r.nraw, tc.nraw)
	}
	if r.sraw != tc.raw {
		i := firstDiffWord(&r.sraw, &tc.raw)
		t.Fatalf("%s: raw bitmap word %d (%s) is %#08x, want %#08x", name, i, lay.bitmapWord(i), r.sraw[i], tc.raw[i])
	}
	if float64(r.merr) != tc.merr {
		t.Errorf("%s: merr %g, want %g", name, r.merr, tc.merr)
	}
}
