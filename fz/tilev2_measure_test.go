package fz

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTileV2Ratios prints version 2's ratio beside version 1's and cuSZp's
// on the compare.sh fields tiled to 1 GiB (every tile encoded, container
// header and index as in both versions), and on every real field of
// ../shared/data, where it also checks that version 2 decodes to exactly
// version 1's values (FZ_EXPERIMENT_PEERS=0 leaves the tiled fields out).
func TestTileV2Ratios(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	dir := sharedData(t)
	rels := []float64{1e-2, 1e-3, 1e-4}
	if os.Getenv("FZ_EXPERIMENT_PEERS") != "0" {
		for _, f := range peerFields(t, dir) {
			n, _ := NumElements(f.dims)
			for i, rel := range rels {
				var size [2]uint64
				for k, enc := range []func(*tileScratch, *tileStats, []float32, *layout, uint64, *quantizer, []byte) []byte{encodeTile[float32], encodeTileV2[float32]} {
					slabTilesWith(f, rel, 1, enc, func(s *tileScratch, l *layout, tt uint64, b []byte) { size[k] += uint64(len(b)) })
				}
				r1 := float64(4*n) / float64(size[0]+containerOverhead(f.dims))
				r2 := float64(4*n) / float64(size[1]+containerOverhead(f.dims))
				t.Logf("| %s %v | %g | %.3f | %.3f | %.2f | %.3f |", f.name, f.dims, rel, r1, r2, f.cusz[i], r2/f.cusz[i])
			}
		}
	}
	for _, f := range realFields {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range rels {
			p := Params{DType: f.dtype, Dims: f.dims, Mode: Rel, Bound: rel, Fill: f.fill}
			var s1, s2 int
			if f.dtype == Float32 {
				v := checkV2MatchesV1(t, asFloats[float32](raw), p)
				s1, s2 = v.size(false), v.size(true)
			} else {
				v := checkV2MatchesV1(t, asFloats[float64](raw), p)
				s1, s2 = v.size(false), v.size(true)
			}
			t.Logf("| %s | %g | %.3f | %.3f | %.3f× |", f.name, rel, float64(len(raw))/float64(s1), float64(len(raw))/float64(s2), float64(s1)/float64(s2))
		}
	}
}

// TestTileV2Speed prints single-goroutine tile encode and decode rates of
// both versions (MB/s of input) on the real fields and a 128 MiB slab of
// the smooth field, best of 3.
func TestTileV2Speed(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	dir := sharedData(t)
	type job struct {
		name string
		src  []float32
		p    Params
	}
	var jobs []job
	for _, f := range realFields {
		if f.dtype != Float32 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{f.name, asFloats[float32](raw), Params{DType: Float32, Dims: f.dims, Mode: Rel, Fill: f.fill}})
	}
	sm := peerFields(t, dir)[0]
	slab := make([]float32, 32*1024*1024)
	for i := range slab {
		slab[i] = sm.value(uint64(i))
	}
	jobs = append(jobs, job{"smooth3d[0:32]", slab, Params{DType: Float32, Dims: []uint64{32, 1024, 1024}, Mode: Rel}})
	for _, rel := range []float64{1e-2, 1e-3, 1e-4} {
		var bytes int
		var enc, dec [2]time.Duration
		for _, j := range jobs {
			j.p.Bound = rel
			f, err := encodeBoth(j.src, j.p)
			if err != nil {
				t.Fatal(err)
			}
			bytes += 4 * len(j.src)
			s := new(tileScratch)
			out := make([]float32, len(j.src))
			for k := 0; k < 2; k++ {
				best, bestD := time.Duration(1<<62), time.Duration(1<<62)
				for rep := 0; rep < 3; rep++ {
					var st tileStats
					buf := make([]byte, 0, 64<<10)
					t0 := time.Now()
					for tt := uint64(0); tt < f.l.tiles; tt++ {
						if k == 0 {
							buf = encodeTile(s, &st, j.src, f.l, tt, f.qz, buf[:0])
						} else {
							buf = encodeTileV2(s, &st, j.src, f.l, tt, f.qz, buf[:0])
						}
					}
					best = min(best, time.Since(t0))
					t0 = time.Now()
					for tt := uint64(0); tt < f.l.tiles; tt++ {
						var err error
						if k == 0 {
							err = decodeTile(s, f.v1[tt], out, 0, f.l, tt, f.qz.step, f.fill)
						} else {
							err = decodeTileV2(s, f.v2[tt], out, 0, f.l, tt, f.qz.step, f.fill)
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					bestD = min(bestD, time.Since(t0))
				}
				enc[k] += best
				dec[k] += bestD
			}
		}
		mbs := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(bytes)/d.Seconds()/1e6) }
		t.Logf("rel %g, %d MB: encode v1 %s MB/s, v2 %s MB/s; decode v1 %s MB/s, v2 %s MB/s", rel, bytes>>20, mbs(enc[0]), mbs(enc[1]), mbs(dec[0]), mbs(dec[1]))
	}
}

// TestTileV2MaxRates prints the mean over tiles of the largest group rate
// (the magnitude planes a GPU warp walks per tile in the v2 tail), every
// 16th slab of the compare.sh fields: the input of the GPU cost estimate.
func TestTileV2MaxRates(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	for _, f := range peerFields(t, sharedData(t)) {
		line := f.name
		for _, rel := range []float64{1e-2, 1e-3, 1e-4} {
			var sum, n int
			slabTiles(f, rel, 16, func(s *tileScratch, l *layout, tt uint64, v1 []byte) {
				// v1's plane mask: the highest magnitude plane in use + 1 is the tile's largest rate.
				sum += bits.Len32(binary.LittleEndian.Uint32(v1) & 0x7FFF)
				n++
			})
			line += fmt.Sprintf("  rel %g: %.2f", rel, float64(sum)/float64(n))
		}
		t.Log(line)
	}
}

// TestTileV2Shapes prints version 2's ratio on the real fields of
// rank 2 and 3 under other tile and sub-block shapes (v1's are first).
func TestTileV2Shapes(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	dir := sharedData(t)
	shapes := map[int][]shape{
		2: {{[3]int{1, 64, 64}, [3]int{1, 16, 8}}, {[3]int{1, 64, 64}, [3]int{1, 8, 16}}, {[3]int{1, 64, 64}, [3]int{1, 4, 32}},
			{[3]int{1, 32, 128}, [3]int{1, 8, 16}}, {[3]int{1, 16, 256}, [3]int{1, 4, 32}}},
		3: {{[3]int{8, 16, 32}, [3]int{4, 4, 8}}, {[3]int{8, 16, 32}, [3]int{2, 4, 16}}, {[3]int{16, 16, 16}, [3]int{4, 4, 8}},
			{[3]int{4, 32, 32}, [3]int{2, 8, 8}}},
	}
	defer func() { defaultShape = defaultShapeOf }()
	for rank := 2; rank <= 3; rank++ {
		for _, sh := range shapes[rank] {
			defaultShape = func(r int) shape {
				if r == rank {
					return sh
				}
				return defaultShapeOf(r)
			}
			line := ""
			for _, f := range realFields {
				if _, _, _, r := foldDims(f.dims); r != rank || f.dtype != Float32 {
					continue
				}
				raw, err := os.ReadFile(filepath.Join(dir, f.name))
				if err != nil {
					t.Fatal(err)
				}
				line += " " + f.name[:8]
				for _, rel := range []float64{1e-2, 1e-3, 1e-4} {
					v, err := encodeBoth(asFloats[float32](raw), Params{DType: Float32, Dims: f.dims, Mode: Rel, Bound: rel, Fill: f.fill})
					if err != nil {
						t.Fatal(err)
					}
					line += fmt.Sprintf(" %.2f", float64(len(raw))/float64(v.size(true)))
				}
			}
			t.Logf("rank %d tile %v block %v:%s", rank, sh.tile, sh.block, line)
		}
	}
}
