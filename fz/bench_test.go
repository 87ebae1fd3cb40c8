package fz

import (
	"context"
	"math"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: with one worker it gives
// a per-core throughput that other load on the machine does not distort.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchSrc = smoothField(128, 256, 256)

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

func benchField(b *testing.B, workers, version int) {
	src := asBytes(benchSrc)
	p := Params{DType: Float32, Dims: []uint64{128, 256, 256}, Mode: Rel, Bound: 1e-3}
	ctx := context.Background()
	blob, st, err := Compress(ctx, src, p, WithWorkers(workers), WithFormatVersion(version))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("compress", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		c0 := cpuTime()
		best := time.Duration(math.MaxInt64)
		for b.Loop() {
			t0 := time.Now()
			if _, _, err := Compress(ctx, src, p, WithWorkers(workers), WithFormatVersion(version)); err != nil {
				b.Fatal(err)
			}
			best = min(best, time.Since(t0))
		}
		b.ReportMetric(float64(len(src))*float64(b.N)/(cpuTime()-c0).Seconds()/1e6, "MB/cpu-s")
		b.ReportMetric(float64(len(src))/best.Seconds()/1e6, "best-MB/s")
		b.ReportMetric(st.Ratio(), "ratio")
	})
	b.Run("decompress", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		dst := make([]byte, len(src))
		c0 := cpuTime()
		best := time.Duration(math.MaxInt64)
		for b.Loop() {
			t0 := time.Now()
			if _, err := DecompressTo(ctx, blob, dst, WithWorkers(workers)); err != nil {
				b.Fatal(err)
			}
			best = min(best, time.Since(t0))
		}
		b.ReportMetric(float64(len(src))*float64(b.N)/(cpuTime()-c0).Seconds()/1e6, "MB/cpu-s")
		b.ReportMetric(float64(len(src))/best.Seconds()/1e6, "best-MB/s")
	})
}

// BenchmarkSmooth3D1Core measures per-core throughput (one worker).
func BenchmarkSmooth3D1Core(b *testing.B) { benchField(b, 1, 1) }

// BenchmarkSmooth3DAllCores uses every core.
func BenchmarkSmooth3DAllCores(b *testing.B) { benchField(b, 0, 1) }

// BenchmarkSmooth3D1CoreV2 is BenchmarkSmooth3D1Core writing container
// version 2.
func BenchmarkSmooth3D1CoreV2(b *testing.B) { benchField(b, 1, 2) }

// BenchmarkSmooth3DAllCoresV2 is BenchmarkSmooth3DAllCores with version 2.
func BenchmarkSmooth3DAllCoresV2(b *testing.B) { benchField(b, 0, 2) }
