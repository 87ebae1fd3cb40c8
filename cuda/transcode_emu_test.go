package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestTranscodeEmulated checks the GPU decoder's version-2 transcode
// (transcode.cuh) without a GPU: tools/transcode_emu.cpp runs transcode_tile
// and transcode_v2_kernel (in jobs of two chunks) on the host (32 threads
// as the warp's lanes, AddressSanitizer on every tile's exact bytes, on
// the bound of each v1 tile and on the job's v1 buffer) over the tiles of
// CPU v2 containers — plain, one per reject rule (v2RuleCases) and randomly
// damaged — and from its v1 tiles this test builds the v1 container the
// GPU's v1 decoders would see.
// fz must decode that as it decodes the v2 container (same bytes), and the
// two must be rejected alike. The v1 decoders themselves are the ones the
// GPU tests check against the CPU.
func TestTranscodeEmulated(t *testing.T) {
	emu := buildEmu(t, "transcode_emu.cpp", "-pthread")
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	type cont struct {
		name string
		c    *v2Container
	}
	var conts []cont
	add := func(name string, blob []byte) {
		conts = append(conts, cont{name, openContainer(t, blob)})
	}
	fill := -9999.0
	var bases [][]byte
	for _, dims := range [][]uint64{{9000}, {128, 128}, {70, 100}, {16, 32, 64}, {12, 33, 49}} {
		n, _ := fz.NumElements(dims)
		for vi, val := range []func(i int, x float64) float64{
			func(i int, x float64) float64 { return x },
			func(i int, x float64) float64 {
				switch {
				case i%509 == 3:
					return math.NaN()
				case i%97 == 5:
					return x * 1e3
				case (i/300)%4 == 1 || i%211 == 0:
					return fill
				}
				return x + r.NormFloat64()*0.01
			},
		} {
			v := make([]float64, n)
			for i := range v {
				v[i] = val(i, math.Sin(float64(i)*0.003)*40+math.Cos(float64(i)*0.0007)*10)
			}
			dt := []fz.DType{fz.Float32, fz.Float64}[len(bases)%2]
			p := fz.Params{DType: dt, Dims: dims, Mode: fz.Rel, Bound: 1e-3}
			if vi == 1 {
				p.Mode, p.Fill = fz.Abs, &fill
			}
			b := v2Blob(t, floatBytes(dt, v), p, fz.WithTilesPerChunk(3))
			add(fmt.Sprintf("%v %d %v", dims, vi, dt), b)
			bases = append(bases, b)
		}
		b := v2Blob(t, floatBytes(fz.Float32, escapeEdges(int(n))), fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Abs, Bound: 0.5}, fz.WithTilesPerChunk(3))
		add(fmt.Sprintf("%v escape edges", dims), b)
		bases = append(bases, b)
	}
	for _, c := range v2RuleCases(t) {
		add(c.name, c.blob)
	}
	// 1-3 bit flips in one tile's bytes (the tile tables stay valid: the
	// chunk scan before the transcode is version 1's), half of them in the
	// first 64 bytes, where the code section starts
	for k := 0; k < 150; k++ {
		b := append([]byte(nil), bases[r.IntN(len(bases))]...)
		c := openContainer(t, b)
		h := c.h
		tr := c.tiles(r.IntN(len(h.Chunks)))
		ts := tr[r.IntN(len(tr))]
		for j := 0; j < 1+r.IntN(3); j++ {
			lim := ts[1] - ts[0]
			if r.IntN(2) == 0 && lim > 64 {
				lim = 64
			}
			b[ts[0]+uint64(r.IntN(int(lim)))] ^= byte(1 << r.IntN(8))
		}
		resealChunks(h, b)
		add(fmt.Sprintf("bit flips %d", k), b)
	}

	le := binary.LittleEndian
	var in bytes.Buffer
	for _, e := range conts {
		var tl []byte
		nt := 0
		for ch := range e.c.h.Chunks {
			first, _ := e.c.g.ChunkTiles(uint64(ch))
			for ti, tr := range e.c.tiles(ch) {
				tl = le.AppendUint64(tl, tr[0])
				tl = le.AppendUint32(tl, uint32(tr[1]-tr[0]))
				tl = le.AppendUint32(tl, uint32(e.c.tileN(first+uint64(ti))))
				nt++
			}
		}
		in.Write(le.AppendUint64(nil, uint64(len(e.c.blob))))
		in.Write(e.c.blob)
		for _, x := range []uint64{e.c.h.IndexOffset(), e.c.g.TilesPerChunk, uint64(len(e.c.h.Chunks)), uint64(nt)} {
			in.Write(le.AppendUint64(nil, x))
		}
		in.Write(tl)
	}
	ob := runEmu(t, emu, in.Bytes())
	at, codes, same, rejected := 0, map[uint32]int{}, 0, 0
	for _, e := range conts {
		var first uint32
		var v1 [][][]byte
		for ch := range e.c.h.Chunks {
			var tl [][]byte
			for range e.c.tiles(ch) {
				if at+8 > len(ob) {
					t.Fatalf("transcode_emu wrote %d bytes, fewer than the tiles need", len(ob))
				}
				code, n := le.Uint32(ob[at:]), int(le.Uint32(ob[at+4:]))
				tl = append(tl, ob[at+8:at+8+n])
				at += 8 + n
				if code != 0 && first == 0 {
					first = code
				}
				codes[code]++
			}
			v1 = append(v1, tl)
		}
		_, cout, cerr := fz.Decompress(ctx, e.c.blob)
		var gout []byte
		var gerr error
		if first != 0 {
			gerr = fmt.Errorf("transcode rejects a tile: %s", decodeReasons[first])
		} else {
			_, gout, gerr = fz.Decompress(ctx, e.c.assemble(1, v1))
		}
		switch {
		case (cerr == nil) != (gerr == nil):
			t.Errorf("%s: CPU v2 decode: %v; transcode + v1 decode: %v", e.name, cerr, gerr)
		case cerr != nil:
			rejected++
		case !bytes.Equal(cout, gout):
			t.Errorf("%s: transcode + v1 decode differs from the CPU v2 decode at byte %d", e.name, firstDiff(cout, gout))
		default:
			same++
		}
	}
	if at != len(ob) {
		t.Errorf("transcode_emu wrote %d bytes, the tiles take %d", len(ob), at)
	}
	t.Logf("%d containers decode alike, %d rejected alike; transcode results per tile (0 = ok, else FZGPU_DE_*): %v", same, rejected, codes)
}
