package fz

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// v2Field is a field encoded tile by tile with both tile codings (no
// container around them): for measurements and value-by-value checks.
type v2Field[T float] struct {
	l      *layout
	qz     *quantizer
	fill   T
	v1, v2 [][]byte // per tile
}

// encodeBoth quantizes src as Compress does and encodes every tile with
// version 1 and with version 2.
func encodeBoth[T float](src []T, p Params) (*v2Field[T], error) {
	_, _, _, rank := foldDims(p.Dims)
	l, err := newLayout(p.Dims, defaultShape(rank), DefaultTilesPerChunk)
	if err != nil {
		return nil, err
	}
	f := &v2Field[T]{l: l, qz: &quantizer{}}
	if p.Fill != nil {
		f.qz.hasFill, f.qz.fillBits = true, bitsOf(T(*p.Fill))
		f.fill = T(*p.Fill)
	}
	lo, hi, have := valueRange(src, f.qz, 1)
	if p.Mode == Abs {
		have = false
	}
	eb, step, err := DeriveBound(p, lo, hi, have)
	if err != nil {
		return nil, err
	}
	f.qz.step, f.qz.eb, f.qz.inv = step, eb, 1/step
	s := new(tileScratch)
	var st tileStats
	for t := uint64(0); t < l.tiles; t++ {
		f.v1 = append(f.v1, encodeTile(s, &st, src, l, t, f.qz, nil))
		f.v2 = append(f.v2, encodeTileV2(s, &st, src, l, t, f.qz, nil))
	}
	return f, nil
}

// decode decodes every tile of one coding.
func (f *v2Field[T]) decode(v2 bool) ([]T, error) {
	out := make([]T, f.l.n)
	s := new(tileScratch)
	for t := uint64(0); t < f.l.tiles; t++ {
		var err error
		if v2 {
			err = decodeTileV2(s, f.v2[t], out, 0, f.l, t, f.qz.step, f.fill)
		} else {
			err = decodeTile(s, f.v1[t], out, 0, f.l, t, f.qz.step, f.fill)
		}
		if err != nil {
			return nil, fmt.Errorf("tile %d: %w", t, err)
		}
	}
	return out, nil
}

// size is the bytes of one coding's tiles plus their u32 size entries.
func (f *v2Field[T]) size(v2 bool) (n int) {
	tiles := f.v1
	if v2 {
		tiles = f.v2
	}
	for _, b := range tiles {
		n += len(b) + 4
	}
	return n
}

// checkV2MatchesV1 encodes src with both tile codings and requires version
// 2 to decode to exactly the values version 1 decodes to (both store the
// same residuals losslessly), version 1 to meet the bound, and every v2
// tile's code section to be the bytes refV2Codes writes from its codes.
func checkV2MatchesV1[T float](t *testing.T, src []T, p Params) *v2Field[T] {
	t.Helper()
	f, err := encodeBoth(src, p)
	if err != nil {
		t.Fatalf("%v %v: %v", p.DType, p.Dims, err)
	}
	want, err := f.decode(false)
	if err != nil {
		t.Fatalf("v1 decode: %v", err)
	}
	got, err := f.decode(true)
	if err != nil {
		t.Fatalf("v2 decode: %v", err)
	}
	for i := range want {
		if bitsOf(got[i]) != bitsOf(want[i]) {
			t.Fatalf("%v %v bound %g: value %d: v2 decodes %v, v1 %v", p.DType, p.Dims, p.Bound, i, got[i], want[i])
		}
		x := src[i]
		exact := x != x || math.IsInf(float64(x), 0) || (f.qz.hasFill && bitsOf(x) == f.qz.fillBits)
		if exact && bitsOf(x) != bitsOf(got[i]) || !exact && !(math.Abs(float64(x)-float64(got[i])) <= f.qz.eb) {
			t.Fatalf("value %d: %v came back as %v (bound %g)", i, x, got[i], f.qz.eb)
		}
	}
	checkRefCodes(t, f)
	return f
}

// checkRefCodes re-encodes the code section of every v2 tile with
// refV2Codes, from the codes the v1 tile holds (v1 escapes and |d| = 32767
// become v2 escapes), and compares bytes.
func checkRefCodes[T float](t *testing.T, f *v2Field[T]) {
	t.Helper()
	s := new(tileScratch)
	out := make([]T, f.l.n)
	for tt := range f.v1 {
		if err := decodeTile(s, f.v1[tt], out, 0, f.l, uint64(tt), f.qz.step, f.fill); err != nil {
			t.Fatal(err)
		}
		// decodeTile leaves the v1 codes in s.lo/s.hi.
		var mag [TileElems]uint16
		var neg [TileElems]bool
		for i := range mag {
			c := uint16(s.lo[i]) | uint16(s.hi[i])<<8
			m := c & 0x7FFF
			if c == escapeCode || m == 32767 {
				mag[i] = 32767 // a v2 escape, sign 0
				continue
			}
			mag[i], neg[i] = m, c&0x8000 != 0
		}
		ref := refV2Codes(&mag, &neg)
		b := f.v2[tt]
		w0 := binary.LittleEndian.Uint32(b)
		if (w0&v2Codes != 0) != (len(ref) > 0) {
			t.Fatalf("tile %d: word0 %#x, reference code section %d bytes", tt, w0, len(ref))
		}
		if !bytes.Equal(b[8:8+len(ref)], ref) {
			t.Fatalf("tile %d: code section differs from the reference encoder:\n got % x\nwant % x", tt, b[8:8+len(ref)], ref)
		}
		// The v1 tile's escape list equals the v2 tile's only without
		// |d| = 32767; the v2 flag follows the magnitudes.
		nesc := 0
		for _, m := range mag {
			if m == 32767 {
				nesc++
			}
		}
		if (w0&tileHasEscapes != 0) != (nesc > 0) {
			t.Fatalf("tile %d: escape flag %v but %d escapes", tt, w0&tileHasEscapes != 0, nesc)
		}
	}
}

// refV2Codes is a bit-by-bit reading of the version-2 code section
// (docs/FORMAT.md §5.2, from block mask to signs) written independently of
// the product encoder; nil when no magnitude is non-zero.
func refV2Codes(mag *[TileElems]uint16, neg *[TileElems]bool) []byte {
	var rate [v2Groups]int
	for g := range rate {
		for j := 0; j < 16; j++ {
			rate[g] = max(rate[g], bits.Len16(mag[16*g+j]))
		}
	}
	var blocks uint32
	for g, r := range rate {
		if r > 0 {
			blocks |= 1 << (g / 8)
		}
	}
	if blocks == 0 {
		return nil
	}
	le := binary.LittleEndian
	out := le.AppendUint32(nil, blocks)
	for k := 0; k < 32; k++ {
		if blocks>>k&1 == 0 {
			continue
		}
		var v uint32
		for j := 0; j < 8; j++ {
			v |= uint32(rate[8*k+j]) << (4 * j)
		}
		out = le.AppendUint32(out, v)
	}
	w := 0
	for g, r := range rate {
		for p := 0; p < r; p++ {
			var u uint16
			for j := 0; j < 16; j++ {
				u |= (mag[16*g+j] >> p & 1) << j
			}
			out = le.AppendUint16(out, u)
			w++
		}
	}
	if w%2 == 1 {
		out = le.AppendUint16(out, 0)
	}
	var signs []uint32
	nbits := 0
	for i, m := range mag {
		if m == 0 {
			continue
		}
		if nbits%32 == 0 {
			signs = append(signs, 0)
		}
		if neg[i] {
			signs[nbits/32] |= 1 << (nbits % 32)
		}
		nbits++
	}
	for _, x := range signs {
		out = le.AppendUint32(out, x)
	}
	return out
}

func TestTileV2RoundTrip(t *testing.T) {
	for _, simd := range []bool{true, false} {
		t.Run(fmt.Sprintf("simd=%v", simd && haveAVX2), func(t *testing.T) {
			setSIMD(t, simd)
			r := rand.New(rand.NewPCG(30, 2))
			for it := 0; it < 150; it++ {
				dims := randomShape(r)
				n, _ := NumElements(dims)
				kind := r.IntN(8)
				p := Params{Dims: dims, Mode: Mode(1 + r.IntN(2)), Bound: []float64{1e-1, 1e-2, 1e-3, 1e-4, 1e-6}[r.IntN(5)]}
				if kind >= 5 || r.IntN(4) == 0 {
					p.Fill = ptr(-1e34)
				}
				if r.IntN(2) == 0 {
					v := make([]float32, n)
					adversarial(r, v, kind)
					p.DType = Float32
					if _, err := encodeBoth(v, p); err != nil {
						continue // a rel bound that overflows: refused as Compress refuses it
					}
					checkV2MatchesV1(t, v, p)
				} else {
					v := make([]float64, n)
					adversarial(r, v, kind)
					p.DType = Float64
					if _, err := encodeBoth(v, p); err != nil {
						continue
					}
					checkV2MatchesV1(t, v, p)
				}
			}
		})
	}
}

// TestContainerV2MatchesV1 compresses whole fields with both versions
// through Compress and requires value-for-value identical decodes, the
// header version, and that region decoding and CheckContainer read v2.
func TestContainerV2MatchesV1(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(4, 40))
	for it := 0; it < 60; it++ {
		dims := randomShape(r)
		n, _ := NumElements(dims)
		kind := r.IntN(8)
		p := Params{DType: Float32, Dims: dims, Mode: Mode(1 + r.IntN(2)), Bound: []float64{1e-2, 1e-3, 1e-5}[r.IntN(3)]}
		if kind >= 5 {
			p.Fill = ptr(-1e34)
		}
		var raw []byte
		if it%2 == 0 {
			v := make([]float32, n)
			adversarial(r, v, kind)
			raw = asBytes(v)
		} else {
			p.DType = Float64
			v := make([]float64, n)
			adversarial(r, v, kind)
			raw = asBytes(v)
		}
		tpc := WithTilesPerChunk(1 + r.IntN(4))
		b1, _, err1 := Compress(ctx, raw, p, tpc)
		b2, st2, err2 := Compress(ctx, raw, p, tpc, WithFormatVersion(2), WithWorkers(1+r.IntN(3)))
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("v1 error %v, v2 error %v", err1, err2)
		}
		if err1 != nil {
			continue
		}
		h1, o1, err := Decompress(ctx, b1)
		if err != nil {
			t.Fatal(err)
		}
		h2, o2, err := Decompress(ctx, b2)
		if err != nil {
			t.Fatalf("v2 %v %s: %v", p.DType, FormatDims(dims), err)
		}
		if h1.Version != 1 || h2.Version != 2 || b2[4] != 2 {
			t.Fatalf("versions %d and %d", h1.Version, h2.Version)
		}
		if !bytes.Equal(o1, o2) {
			t.Fatalf("%v %s: v2 decodes to other values than v1", p.DType, FormatDims(dims))
		}
		if p.DType == Float32 {
			verify(t, asFloats[float32](raw), b2, st2.AbsEB, p.Fill)
		} else {
			verify(t, asFloats[float64](raw), b2, st2.AbsEB, p.Fill)
		}
		if bad, err := CheckContainer(ctx, h2, b2, 2); err != nil || len(bad) > 0 {
			t.Fatalf("CheckContainer: %v %v", bad, err)
		}
		if dims[0] > 1 {
			reg := Region{Lo: dims[0] / 3, Hi: dims[0]/3 + 1}
			part, err := DecodeRegion(ctx, h2, reg, func(c int) ([]byte, error) {
				ch := h2.Chunks[c]
				return b2[ch.Offset : ch.Offset+ch.Size], nil
			})
			if err != nil {
				t.Fatal(err)
			}
			per := uint64(len(o1)) / dims[0]
			if !bytes.Equal(part, o1[reg.Lo*per:reg.Hi*per]) {
				t.Fatalf("region %v of the v2 container differs", reg)
			}
		}
	}
}

// escapeField is a 1-D float32 field whose residuals (abs bound 0.5: step
// 1, q = value) are exactly the given ones, in order, from element 1 on.
func escapeField(res []int32) []float32 {
	v := make([]float32, len(res)+1)
	q := int32(0)
	for i, d := range res {
		q += d
		v[i+1] = float32(q)
	}
	return v
}

// tileEscapes encodes every tile of a 1-D float32 field under abs 0.5
// (step 1, q = value) with one version and returns each tile's escape
// list length (the escape count the tile stores).
func tileEscapes(t *testing.T, v []float32, v2 bool) []int {
	t.Helper()
	l, err := newLayout([]uint64{uint64(len(v))}, defaultShape(1), DefaultTilesPerChunk)
	if err != nil {
		t.Fatal(err)
	}
	qz := &quantizer{step: 1, eb: 0.5, inv: 1}
	s := new(tileScratch)
	var st tileStats
	var out []int
	for tt := uint64(0); tt < l.tiles; tt++ {
		if v2 {
			encodeTileV2(s, &st, v, l, tt, qz, nil)
		} else {
			encodeTile(s, &st, v, l, tt, qz, nil)
		}
		out = append(out, len(s.esc))
	}
	return out
}

// wantEscapes counts, per tile of 4096 values, the residuals of v (q =
// value) at or above the escape threshold, origins left out.
func wantEscapes(v []float32, threshold int32) []int {
	var out []int
	for i := range v {
		if i%TileElems == 0 {
			out = append(out, 0)
			continue
		}
		d := int32(v[i]) - int32(v[i-1])
		if d >= threshold || d <= -threshold {
			out[len(out)-1]++
		}
	}
	return out
}

// TestTileV2EscapeThreshold: |d| ≤ 32766 is a code in both versions,
// |d| = 32767 a code in v1 and an escape in v2, |d| ≥ 32768 an escape in
// both; the tiles' escape counts are exactly those, and v2 decodes to v1's
// values.
func TestTileV2EscapeThreshold(t *testing.T) {
	for _, simd := range []bool{true, false} {
		setSIMD(t, simd)
		for _, d := range []int32{32765, 32766, -32766, 32767, -32767, 32768, -32768, 1 << 20} {
			// The residual alone, then d and −d alternating (so q stays
			// small), on a tile of 300 values and on a full one and a half.
			for _, n := range []int{300, 6000} {
				res := make([]int32, n-1)
				res[40] = d
				res[41] = -d
				for i := 200; i+1 < len(res) && i < 260; i += 2 {
					res[i], res[i+1] = d, -d
				}
				v := escapeField(res)
				checkV2MatchesV1(t, v, Params{DType: Float32, Dims: []uint64{uint64(len(v))}, Mode: Abs, Bound: 0.5})
				for k, c := range []struct {
					v2  bool
					thr int32
				}{{false, 32768}, {true, 32767}} {
					got, want := tileEscapes(t, v, c.v2), wantEscapes(v, c.thr)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("d = %d, n = %d, version %d: escapes per tile %v, want %v", d, n, k+1, got, want)
					}
				}
			}
		}
	}
}

// TestGoldenResidualsEscapes: the "residuals" golden input has residuals
// of exactly ±32766, ±32767 and ±32768, and its tiles escape exactly the
// ones each version must.
func TestGoldenResidualsEscapes(t *testing.T) {
	v := asFloats[float32](goldenInputs()["residuals"])
	seen := map[int32]bool{}
	for i := 1; i < len(v); i++ {
		seen[int32(v[i])-int32(v[i-1])] = true
	}
	for _, d := range []int32{32766, -32766, 32767, -32767, 32768, -32768} {
		if !seen[d] {
			t.Fatalf("the golden input has no residual %d", d)
		}
	}
	got1, got2 := tileEscapes(t, v, false), tileEscapes(t, v, true)
	if want := wantEscapes(v, 32768); fmt.Sprint(got1) != fmt.Sprint(want) {
		t.Fatalf("v1 escapes %v, want %v", got1, want)
	}
	if want := wantEscapes(v, 32767); fmt.Sprint(got2) != fmt.Sprint(want) {
		t.Fatalf("v2 escapes %v, want %v", got2, want)
	}
	if fmt.Sprint(got1) == fmt.Sprint(got2) {
		t.Fatal("both versions escape the same residuals: the input lost its point")
	}
}

// TestWithFormatVersion: Compress writes the version asked for and refuses
// others, naming the value and what is accepted; readers refuse unknown
// versions.
func TestWithFormatVersion(t *testing.T) {
	ctx := context.Background()
	v := make([]float32, 1000)
	for i := range v {
		v[i] = float32(math.Sin(float64(i) / 10))
	}
	p := Params{DType: Float32, Dims: []uint64{1000}, Mode: Rel, Bound: 1e-3}
	for _, c := range []struct{ opt, want int }{{0, 1}, {1, 1}, {2, 2}} {
		var opts []Option
		if c.opt != 0 {
			opts = append(opts, WithFormatVersion(c.opt))
		}
		blob, _, err := Compress(ctx, asBytes(v), p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint16(blob[4:]); int(got) != c.want {
			t.Fatalf("WithFormatVersion(%d) wrote version %d, want %d", c.opt, got, c.want)
		}
		if ver, err := FormatVersionOf(opts...); err != nil || int(ver) != c.want {
			t.Fatalf("FormatVersionOf(%d) = %d, %v", c.opt, ver, err)
		}
	}
	if DefaultVersion != 1 {
		t.Fatalf("DefaultVersion = %d, this session keeps 1", DefaultVersion)
	}
	for _, bad := range []int{3, -1, 70000, 0xFFFF} {
		_, _, err := Compress(ctx, asBytes(v), p, WithFormatVersion(bad))
		want := fmt.Sprintf("format version %d is not supported: expected 1, 2", bad)
		if err == nil || !contains(err.Error(), want) {
			t.Fatalf("WithFormatVersion(%d): error %v, want it to contain %q", bad, err, want)
		}
		if _, err := FormatVersionOf(WithFormatVersion(bad)); err == nil {
			t.Fatalf("FormatVersionOf(%d) accepted it", bad)
		}
		// Through a backend too: the check comes before the dispatch.
		if _, _, err := Compress(ctx, asBytes(v), p, WithFormatVersion(bad), WithBackend(CPU())); err == nil {
			t.Fatalf("WithFormatVersion(%d) with a backend: no error", bad)
		}
	}
	if s := SettingsOf(WithFormatVersion(-1)); s.FormatVersion != 0xFFFF {
		t.Fatalf("SettingsOf(-1).FormatVersion = %d, want 0xFFFF", s.FormatVersion)
	}
	blob, _, _ := Compress(ctx, asBytes(v), p, WithFormatVersion(2))
	for _, ver := range []uint16{0, 3, 0x0102} {
		b := append([]byte(nil), blob...)
		binary.LittleEndian.PutUint16(b[4:], ver)
		fixCRCs(b)
		want := fmt.Sprintf("unsupported format version %d (this build reads versions 1 and 2)", ver)
		if _, _, err := Decompress(ctx, b); err == nil || !contains(err.Error(), want) {
			t.Fatalf("version %d: %v", ver, err)
		}
	}
}

// TestSignKernels: the BMI2 sign kernels write exactly what their pure-Go
// references write, on random masks of every density.
func TestSignKernels(t *testing.T) {
	if !haveBMI2 {
		t.Skip("no BMI2 on this machine: only the pure-Go sign path exists")
	}
	r := rand.New(rand.NewPCG(3, 33))
	for it := 0; it < 300; it++ {
		var nz [v2Groups]uint16
		var sign [planeBytes]byte
		density := r.IntN(5)
		for g := range nz {
			switch density {
			case 0:
				nz[g] = 0xFFFF
			case 1:
				if r.IntN(8) == 0 {
					nz[g] = uint16(r.Uint32())
				}
			default:
				nz[g] = uint16(r.Uint32()) & uint16(r.Uint32())
			}
			sg := uint16(r.Uint32())
			sign[2*g], sign[2*g+1] = byte(sg), byte(sg>>8)
		}
		var a, b [signBufWords]uint32
		packSignsGo(&nz, &sign, &a)
		packSignsBMI2(&nz, &sign, &b)
		if a != b {
			t.Fatalf("pack: BMI2 %x, Go %x", b, a)
		}
		var in [signBufWords + 1]uint32
		copy(in[:], a[:])
		var ea, eb [planeBytes]byte
		expandSignsGo(&nz, &in, &ea)
		expandSignsBMI2(&nz, &in, &eb)
		if ea != eb {
			t.Fatalf("expand: BMI2 %x, Go %x", eb, ea)
		}
		// The round trip gives back the signs of the selected slots.
		for g, m := range nz {
			want := (uint16(sign[2*g]) | uint16(sign[2*g+1])<<8) & m
			if got := uint16(ea[2*g]) | uint16(ea[2*g+1])<<8; got != want {
				t.Fatalf("group %d: %#x, want %#x", g, got, want)
			}
		}
	}
}

// TestUnitKernels: the unit kernels write exactly what their pure-Go
// references write, top units of 0 and escapes included.
func TestUnitKernels(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2 on this machine: the unit kernels are not used")
	}
	r := rand.New(rand.NewPCG(5, 55))
	for it := 0; it < 300; it++ {
		var rw [v2Blocks]uint32
		var rates [v2Groups]uint16
		w := 0
		for g := range rates {
			if r.IntN(3) > 0 {
				rates[g] = uint16(r.IntN(16))
				if it%5 == 0 {
					rates[g] = 15
				}
			}
			rw[g/8] |= uint32(rates[g]) << (4 * (g % 8))
			w += int(rates[g])
		}
		units := make([]byte, 2*w+2)
		for i := range units {
			units[i] = byte(r.Uint32())
			if it%3 == 0 && r.IntN(4) == 0 {
				units[i] = 0 // some top units 0
			}
			if it%5 == 0 && r.IntN(2) == 0 {
				units[i] = 0xFF // escapes
			}
		}
		var pa, pb [Planes * planeBytes]byte
		var nza, nzb, ea, eb [v2Groups]uint16
		na, ba := scatterUnitsGo(units[:2*w], &rw, &pa, &nza, &ea)
		nb, bb := scatterUnitsAsm(&units[0], &rw, &pb, &nzb, &eb)
		if na != nb || ba != bb || pa != pb || nza != nzb || ea != eb {
			t.Fatalf("scatter: asm (%d, %d), Go (%d, %d); planes equal %v, nz %v, esc %v", nb, bb, na, ba, pa == pb, nza == nzb, ea == eb)
		}
		ga, gb := make([]byte, 2*w+2), make([]byte, 2*w+2)
		gatherUnitsGo(&pa, &rates, ga)
		gatherUnitsAsm(&pa, &rates, &gb[0])
		if !bytes.Equal(ga, gb) || !bytes.Equal(ga[:2*w], units[:2*w]) {
			t.Fatalf("gather: asm and Go differ (%v) or do not give back the units (%v)", !bytes.Equal(ga, gb), !bytes.Equal(ga[:2*w], units[:2*w]))
		}
	}
}
