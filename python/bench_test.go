package python

import (
	"bufio"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// benchField is a 256 MiB float32 field (256x512x512): smooth waves plus
// noise of 1e-3, compressed with a relative bound of 1e-3.
func benchField(b *testing.B) (blob []byte, raw int) {
	b.Helper()
	const nz, ny, nx = 256, 512, 512
	v := make([]float32, nz*ny*nx)
	r := rand.New(rand.NewPCG(1, 2))
	for z := 0; z < nz; z++ {
		for y := 0; y < ny; y++ {
			cy := math.Cos(0.03 * float64(y))
			row := v[(z*ny+y)*nx : (z*ny+y+1)*nx]
			for x := range row {
				row[x] = float32(math.Sin(0.02*float64(x))*cy+0.01*float64(z) + 0.001*r.NormFloat64())
			}
		}
	}
	src := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	blob, _, err := fz.Compress(context.Background(), src, fz.Params{DType: fz.Float32, Dims: []uint64{nz, ny, nx}, Mode: fz.Rel, Bound: 1e-3})
	if err != nil {
		b.Fatal(err)
	}
	return blob, len(src)
}

// BenchmarkDecompress256MiB compares decoding one 256 MiB container with the
// Go codec in process and with the Python package (fzsidecar.decompress:
// libfz through ctypes, in a python3 running bench/bench_decompress.py
// --serve). The two alternate decode by decode, so that both see the same
// machine; each of b.N rounds times four decodes: Go and Python into a fresh
// array (fz.Decompress, fzsidecar.decompress(blob)) and into a reused one
// (fz.DecompressTo, decompress(blob, out=a)). Reported: the best and median
// MB/s of each, and Python/Go as the ratio of the bests and the median of
// the per-round ratios (the issue asks >= 0.9). On a shared machine the
// bests are the least disturbed decodes.
// Run with: go test ./python/ -run XXX -bench Decompress256MiB -benchtime 10x
func BenchmarkDecompress256MiB(b *testing.B) {
	py := install(b)
	blob, raw := benchField(b)
	f := filepath.Join(b.TempDir(), "field.fz")
	if err := os.WriteFile(f, blob, 0o644); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(nativetest.RepoRoot(b), "python", "bench", "bench_decompress.py")
	cmd := exec.Command(py, script, "--fz", f, "--serve")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	lines := bufio.NewScanner(outp)
	if !lines.Scan() || lines.Text() != "ready" {
		b.Fatalf("%s --serve did not start: %q %v", script, lines.Text(), lines.Err())
	}
	python := func(how string) float64 {
		in.Write([]byte(how + "\n"))
		if !lines.Scan() {
			b.Fatalf("%s --serve stopped: %v", script, lines.Err())
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(lines.Text()), 64)
		if err != nil {
			b.Fatalf("%s --serve answered %q", script, lines.Text())
		}
		return s
	}
	ctx := context.Background()
	dst := make([]byte, raw)
	if _, err := fz.DecompressTo(ctx, blob, dst); err != nil { // warm-up, as the script's
		b.Fatal(err)
	}
	var goFresh, pyFresh, goReused, pyReused []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if _, _, err := fz.Decompress(ctx, blob); err != nil {
			b.Fatal(err)
		}
		goFresh = append(goFresh, time.Since(t).Seconds())
		pyFresh = append(pyFresh, python("fresh"))
		t = time.Now()
		if _, err := fz.DecompressTo(ctx, blob, dst); err != nil {
			b.Fatal(err)
		}
		goReused = append(goReused, time.Since(t).Seconds())
		pyReused = append(pyReused, python("reused"))
	}
	b.StopTimer()
	mbs := func(secs []float64) (best, median float64) {
		s := slices.Clone(secs)
		slices.Sort(s)
		return float64(raw) / 1e6 / s[0], float64(raw) / 1e6 / s[len(s)/2]
	}
	gfb, gfm := mbs(goFresh)
	pfb, pfm := mbs(pyFresh)
	grb, grm := mbs(goReused)
	prb, prm := mbs(pyReused)
	b.ReportMetric(gfm, "go-fresh-MB/s")
	b.ReportMetric(pfm, "py-fresh-MB/s")
	b.ReportMetric(grm, "go-reused-MB/s")
	b.ReportMetric(prm, "py-reused-MB/s")
	paired := func(py, gosecs []float64) float64 {
		r := make([]float64, len(py))
		for i := range py {
			r[i] = gosecs[i] / py[i]
		}
		slices.Sort(r)
		return r[len(r)/2]
	}
	b.ReportMetric(pfb/gfb, "py/go-fresh-best")
	b.ReportMetric(prb/grb, "py/go-reused-best")
	b.ReportMetric(paired(pyFresh, goFresh), "py/go-fresh-paired")
	b.ReportMetric(paired(pyReused, goReused), "py/go-reused-paired")
	b.Logf("256 MiB f32 -> %d bytes (ratio %.2f), GOMAXPROCS %d, %d rounds", len(blob), float64(raw)/float64(len(blob)), runtime.GOMAXPROCS(0), b.N)
	b.Logf("fresh array:  Go best %.0f median %.0f MB/s; Python best %.0f median %.0f MB/s", gfb, gfm, pfb, pfm)
	b.Logf("reused array: Go best %.0f median %.0f MB/s; Python best %.0f median %.0f MB/s", grb, grm, prb, prm)
}
