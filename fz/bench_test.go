package fz

import (
	"context"
	"math"
	"testing"
)

// smoothField is a deterministic smooth 3D float32 field (sums of sines
// plus a little structure), the kind of data the paper's speed numbers use.
func smoothField(nz, ny, nx int) []float32 {
	v := make([]float32, nz*ny*nx)
	i := 0
	for z := 0; z < nz; z++ {
		for y := 0; y < ny; y++ {
			for x := 0; x < nx; x++ {
				fz, fy, fx := float64(z)/float64(nz), float64(y)/float64(ny), float64(x)/float64(nx)
				v[i] = float32(100*math.Sin(6*fx+2*fy)*math.Cos(4*fz) + 30*math.Sin(13*fy*fz+fx) + 5*math.Cos(40*fx*fy))
				i++
			}
		}
	}
	return v
}

func benchField(b *testing.B, workers int) {
	src := asBytes(smoothField(128, 256, 256))
	p := Params{DType: Float32, Dims: []uint64{128, 256, 256}, Mode: Rel, Bound: 1e-3}
	ctx := context.Background()
	blob, st, err := Compress(ctx, src, p, WithWorkers(workers))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("compress", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, _, err := Compress(ctx, src, p, WithWorkers(workers)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(st.Ratio(), "ratio")
	})
	b.Run("decompress", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		dst := make([]byte, len(src))
		for b.Loop() {
			if _, err := DecompressTo(ctx, blob, dst, WithWorkers(workers)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSmooth3D1Core measures per-core throughput (one worker).
func BenchmarkSmooth3D1Core(b *testing.B) { benchField(b, 1) }

// BenchmarkSmooth3DAllCores uses every core.
func BenchmarkSmooth3DAllCores(b *testing.B) { benchField(b, 0) }
