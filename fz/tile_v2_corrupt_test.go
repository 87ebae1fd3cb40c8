package fz

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// rawTileV2 is a version-2 tile written field by field, so that a test can
// break exactly one rule of docs/FORMAT.md §7.
type rawTileV2 struct {
	word0, origin uint32
	blocks        uint32
	rates         []uint32
	units         []uint16 // including any padding u16
	signs         []uint32
	tail          []uint32 // escape count, escapes, …
}

func (r rawTileV2) bytes() []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, r.word0)
	b = le.AppendUint32(b, r.origin)
	if r.word0&v2Codes != 0 {
		b = le.AppendUint32(b, r.blocks)
		for _, v := range r.rates {
			b = le.AppendUint32(b, v)
		}
		for _, u := range r.units {
			b = le.AppendUint16(b, u)
		}
		for _, s := range r.signs {
			b = le.AppendUint32(b, s)
		}
	}
	for _, v := range r.tail {
		b = le.AppendUint32(b, v)
	}
	return b
}

// decodeRawV2 decodes one tile of a 1-D float32 field of n values (tile 0,
// step 1: values are q).
func decodeRawV2(t *testing.T, n int, b []byte) ([]float32, error) {
	t.Helper()
	l, err := newLayout([]uint64{uint64(n)}, defaultShape(1), DefaultTilesPerChunk)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	return out, decodeTileV2(new(tileScratch), b, out, 0, l, 0, 1, 0)
}

// validRawV2 is a tile of n ≥ 64 values: origin 5, slot 16 (element 16)
// residual +3, slot 17 residual −1: group 1 has rate 2.
func validRawV2() rawTileV2 {
	return rawTileV2{word0: v2Codes, origin: 5, blocks: 1, rates: []uint32{2 << 4},
		units: []uint16{0b11, 0b01}, signs: []uint32{0b10}}
}

func TestTileV2HandWritten(t *testing.T) {
	for _, n := range []int{4096, 300} {
		out, err := decodeRawV2(t, n, validRawV2().bytes())
		if err != nil {
			t.Fatalf("n = %d: %v", n, err)
		}
		for i, v := range out {
			want := float32(5)
			switch {
			case i == 16:
				want = 8
			case i > 16:
				want = 7
			}
			if v != want {
				t.Fatalf("n = %d: element %d = %v, want %v", n, i, v, want)
			}
		}
	}
	// An escape (magnitude 32767, sign 0) at slot 16 takes the residual from
	// the escape list; slot 17 keeps its code.
	esc := rawTileV2{word0: v2Codes | tileHasEscapes, origin: 5, blocks: 1, rates: []uint32{15 << 4},
		signs: []uint32{0b10}, tail: []uint32{1, uint32(100000)}}
	for p := 0; p < 15; p++ {
		esc.units = append(esc.units, 0b01|uint16(p&1)<<1) // slot 17: magnitude 0b0101… = 0x5555>>1
	}
	esc.units = append(esc.units, 0) // 15 units: pad
	out, err := decodeRawV2(t, 4096, esc.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if m := float32(0x2AAA); out[16] != 5+100000 || out[17] != 5+100000-m {
		t.Fatalf("escape tile decodes to %v, %v; want %v, %v", out[16], out[17], 5+100000, 5+100000-m)
	}
}

// TestTileV2Rejects breaks each rule of docs/FORMAT.md §7 for version 2
// once and requires an error that says what was wrong.
func TestTileV2Rejects(t *testing.T) {
	type tc struct {
		name string
		n    int
		tile func() []byte
		want string
	}
	mod := func(f func(*rawTileV2)) func() []byte {
		return func() []byte {
			r := validRawV2()
			f(&r)
			return r.bytes()
		}
	}
	escTile := func(sign uint32, word0 uint32, tail ...uint32) func() []byte {
		return func() []byte {
			r := rawTileV2{word0: v2Codes | word0, origin: 5, blocks: 1, rates: []uint32{15 << 4}, signs: []uint32{sign}, tail: tail}
			for p := 0; p < 15; p++ {
				r.units = append(r.units, 0b11) // slots 16 and 17: escapes
			}
			r.units = append(r.units, 0)
			return r.bytes()
		}
	}
	cases := []tc{
		{"unknown word0 bit 1", 4096, mod(func(r *rawTileV2) { r.word0 |= 1 << 1 }), "unknown flags 0x2"},
		{"unknown word0 bit 19", 4096, mod(func(r *rawTileV2) { r.word0 |= 1 << 19 }), "unknown flags 0x80000"},
		{"v1 plane-mask bits", 4096, mod(func(r *rawTileV2) { r.word0 |= 0x8000 }), "unknown flags 0x8000"},
		{"codes with block mask 0", 4096, mod(func(r *rawTileV2) { r.blocks, r.rates = 0, nil }), "block mask is 0"},
		{"no code bit but codes", 4096, mod(func(r *rawTileV2) { r.word0 = 0; r.tail = []uint32{1} }), "trailing bytes"},
		{"block past the tile", 300, mod(func(r *rawTileV2) { r.blocks |= 1 << 3; r.rates = append(r.rates, 1) }), "names blocks past the tile's 3"},
		{"listed block with rate word 0", 4096, mod(func(r *rawTileV2) { r.blocks |= 1 << 4; r.rates = append(r.rates, 0) }), "group rates of block 4 are all 0"},
		{"group past n with a rate", 300, mod(func(r *rawTileV2) {
			// block 2 = groups 16…23; group 19 starts at slot 304 ≥ 300.
			r.blocks |= 1 << 2
			r.rates = append(r.rates, 1<<12)
			r.units = append(r.units, 1)
		}), "group 19 (slots 304…319) lies past the tile's 300 values but has rate 1"},
		{"top unit 0", 4096, mod(func(r *rawTileV2) { r.units[1] = 0; r.signs = []uint32{0b10} }), "group 1 has rate 2 but its unit 1 (top magnitude bits) is 0"},
		{"padding not zero", 4096, mod(func(r *rawTileV2) {
			r.rates = []uint32{1 << 4}
			r.units = []uint16{0b11, 7}
		}), "padding u16 is 0x0007"},
		{"magnitude past n", 300, mod(func(r *rawTileV2) {
			// group 18 = slots 288…303; bit 13 is slot 301.
			r.blocks |= 1 << 2
			r.rates = append(r.rates, 1<<8)
			r.units = append(r.units, 1<<13|1, 0)
			r.signs = []uint32{0b10}
		}), "group 18 has magnitude bits in slots 0x2000 at or past the tile's 300 values"},
		{"magnitude in slot 0", 4096, mod(func(r *rawTileV2) {
			r.rates = []uint32{2<<4 | 1}
			r.units = []uint16{1, 0b11, 0b01, 0}
			r.signs = []uint32{0b100}
		}), "slot 0 (the origin) has a non-zero magnitude"},
		{"unused sign bits", 4096, mod(func(r *rawTileV2) { r.signs[0] |= 1 << 2 }), "unused bits of the last word are 0x1"},
		{"unused sign bits high", 4096, mod(func(r *rawTileV2) { r.signs[0] |= 1 << 31 }), "unused bits of the last word are 0x20000000"},
		{"sign words missing", 4096, mod(func(r *rawTileV2) { r.signs = nil }), "sign bits: need 4 bytes, only 0 left"},
		{"extra sign word", 4096, mod(func(r *rawTileV2) { r.signs = append(r.signs, 0) }), "trailing bytes"},
		{"units truncated", 4096, func() []byte { return validRawV2().bytes()[:18] }, "magnitude units: need 4 bytes, only 2 left"},
		{"rates truncated", 4096, func() []byte { return validRawV2().bytes()[:13] }, "group rates: need 4 bytes, only 1 left"},
		{"escape with sign 1", 4096, escTile(0b01, tileHasEscapes, 2, 1, 2), "slot 16 holds an escape (magnitude 32767) with sign 1"},
		{"second escape with sign 1", 4096, escTile(0b10, tileHasEscapes, 2, 1, 2), "slot 17 holds an escape (magnitude 32767) with sign 1"},
		{"escapes without the escape flag", 4096, escTile(0, 0), "more escape codes than its 0 escaped residuals"},
		{"escape count below the escapes", 4096, escTile(0, tileHasEscapes, 1, 7), "more escape codes than its 1 escaped residuals"},
		{"escape count above the escapes", 4096, escTile(0, tileHasEscapes, 3, 7, 8, 9), "lists 3 escaped residuals but has 2 escape codes"},
		{"escape list truncated", 4096, escTile(0, tileHasEscapes, 2, 7), "escaped residuals: need 8 bytes, only 4 left"},
		{"trailing bytes", 4096, mod(func(r *rawTileV2) { r.tail = []uint32{0} }), "tile has 4 trailing bytes"},
		{"empty tile", 4096, func() []byte { return nil }, "tile header: need 4 bytes"},
	}
	for _, c := range cases {
		_, err := decodeRawV2(t, c.n, c.tile())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestTileV2Truncations: every cut of a real v2 tile is an error and bit
// flips never panic (they may decode: no checksum at tile level).
func TestTileV2Truncations(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	v := make([]float32, 64*70)
	adversarial(r, v, 5)
	p := Params{DType: Float32, Dims: []uint64{64, 70}, Mode: Rel, Bound: 1e-3, Fill: ptr(-1e34)}
	f := checkV2MatchesV1(t, v, p)
	out := make([]float32, f.l.n)
	s := new(tileScratch)
	for tt, b := range f.v2 {
		for cut := 0; cut < len(b); cut++ {
			if err := decodeTileV2(s, b[:cut], out, 0, f.l, uint64(tt), f.qz.step, f.fill); err == nil {
				t.Fatalf("tile %d cut to %d of %d bytes decoded without error", tt, cut, len(b))
			}
		}
		for k := 0; k < 2000; k++ {
			c := append([]byte(nil), b...)
			c[r.IntN(len(c))] ^= 1 << r.IntN(8)
			_ = decodeTileV2(s, c, out, 0, f.l, uint64(tt), f.qz.step, f.fill)
		}
	}
}

// sampleContainerV2 is sampleContainer's field written as version 2.
func sampleContainerV2(t testing.TB) []byte {
	v, _ := sampleContainer(t)
	blob, _, err := Compress(context.Background(), asBytes(v), Params{DType: Float32, Dims: []uint64{20, 30, 40}, Mode: Rel, Bound: 1e-4, Fill: ptr(-1e34)},
		WithTilesPerChunk(2), WithFormatVersion(2))
	if err != nil {
		t.Fatal(err)
	}
	return blob
}

// TestCorruptionDetectedV2: any flipped byte of a v2 container is an
// ErrFormat error; a broken tile behind fixed checksums is reported with
// its chunk and tile.
func TestCorruptionDetectedV2(t *testing.T) {
	blob := sampleContainerV2(t)
	ctx := context.Background()
	flipsDetected(t, blob, 16, 1000)
	// Set an unknown word0 bit in chunk 3's tile 1 and fix the checksums.
	h, err := ReadHeader(blob)
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte(nil), blob...)
	ch := b[h.Chunks[3].Offset:]
	tile1 := 8 + binary.LittleEndian.Uint32(ch) // after the 2-entry size table and tile 0
	ch[tile1+3] |= 0x80
	fixCRCs(b)
	_, _, err = Decompress(ctx, b)
	if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "chunk 3, tile 1: tile header has unknown flags 0x80000000") {
		t.Fatalf("broken tile: %v", err)
	}
	bad, err := CheckContainer(ctx, h, b, 1)
	if err != nil || len(bad) != 1 || bad[0].Chunk != 3 {
		t.Fatalf("CheckContainer: %v, %v", bad, err)
	}
}

// TestMutationsBehindChecksumsV2: hostile bytes reach the v2 tile parser;
// it returns an error or decodes something, never panics.
func TestMutationsBehindChecksumsV2(t *testing.T) {
	decodeMutations(sampleContainerV2(t), 19)
}

// FuzzDecodeTileV2 feeds arbitrary bytes to the v2 tile decoder on a full
// tile and on clipped tiles of every rank: errors are fine, panics and
// out-of-range reads are not.
func FuzzDecodeTileV2(f *testing.F) {
	f.Add(validRawV2().bytes(), uint8(0))
	f.Add(validRawV2().bytes(), uint8(1))
	v, _ := sampleContainer(f)
	g, err := encodeBoth(v, Params{DType: Float32, Dims: []uint64{20, 30, 40}, Mode: Rel, Bound: 1e-4, Fill: ptr(-1e34)})
	if err != nil {
		f.Fatal(err)
	}
	for i, b := range g.v2[:4] {
		f.Add(b, uint8(2+i%2))
	}
	shapes := [][]uint64{{4096}, {300}, {20, 30, 40}, {70, 90}}
	layouts := make([]*layout, len(shapes))
	for i, d := range shapes {
		_, _, _, rank := foldDims(d)
		if layouts[i], err = newLayout(d, defaultShape(rank), DefaultTilesPerChunk); err != nil {
			f.Fatal(err)
		}
	}
	s := new(tileScratch)
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		l := layouts[int(which)%len(layouts)]
		out := make([]float32, l.n)
		for _, tt := range []uint64{0, l.tiles - 1} {
			if err := decodeTileV2(s, b, out, 0, l, tt, 0.5, float32(math.NaN())); err == nil && len(b) < 8 {
				t.Fatalf("a %d-byte tile decoded", len(b))
			}
		}
	})
}
