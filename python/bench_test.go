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
	"syscall"
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
				row[x] = float32(math.Sin(0.02*float64(x))*cy + 0.01*float64(z) + 0.001*r.NormFloat64())
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
// the per-round ratios (the issue asks >= 0.9), and per CPU-second (user +
// system time of each process during its decodes). On a shared machine the
// bests are the least disturbed decodes, and CPU time is disturbed least.
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
	// python returns the wall-clock and CPU seconds of one decode there.
	python := func(how string) (float64, float64) {
		in.Write([]byte(how + "\n"))
		if !lines.Scan() {
			b.Fatalf("%s --serve stopped: %v", script, lines.Err())
		}
		f := strings.Fields(lines.Text())
		if len(f) != 2 {
			b.Fatalf("%s --serve answered %q", script, lines.Text())
		}
		wall, err1 := strconv.ParseFloat(f[0], 64)
		cpu, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("%s --serve answered %q", script, lines.Text())
		}
		return wall, cpu
	}
	// goTimed runs one Go decode and returns its wall-clock and CPU seconds
	// (user + system of this process).
	goTimed := func(f func() error) (float64, float64) {
		c := cpuSeconds()
		t := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t).Seconds(), cpuSeconds() - c
	}
	ctx := context.Background()
	dst := make([]byte, raw)
	if _, err := fz.DecompressTo(ctx, blob, dst); err != nil { // warm-up, as the script's
		b.Fatal(err)
	}
	var goFresh, pyFresh, goReused, pyReused []float64     // wall seconds
	var goFreshC, pyFreshC, goReusedC, pyReusedC []float64 // CPU seconds
	add := func(w, c *[]float64) func(float64, float64) {
		return func(wall, cpu float64) { *w = append(*w, wall); *c = append(*c, cpu) }
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		add(&goFresh, &goFreshC)(goTimed(func() error { _, _, err := fz.Decompress(ctx, blob); return err }))
		add(&pyFresh, &pyFreshC)(python("fresh"))
		add(&goReused, &goReusedC)(goTimed(func() error { _, err := fz.DecompressTo(ctx, blob, dst); return err }))
		add(&pyReused, &pyReusedC)(python("reused"))
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
	// MB per CPU-second: the decode's own cost, which other jobs on a
	// shared machine disturb far less than wall-clock time.
	perCPU := func(secs []float64) float64 {
		var t float64
		for _, v := range secs {
			t += v
		}
		return float64(raw) / 1e6 * float64(len(secs)) / t
	}
	gfc, pfc, grc, prc := perCPU(goFreshC), perCPU(pyFreshC), perCPU(goReusedC), perCPU(pyReusedC)
	b.ReportMetric(pfc/gfc, "py/go-fresh-cpu")
	b.ReportMetric(prc/grc, "py/go-reused-cpu")
	b.Logf("256 MiB f32 -> %d bytes (ratio %.2f), GOMAXPROCS %d, %d rounds", len(blob), float64(raw)/float64(len(blob)), runtime.GOMAXPROCS(0), b.N)
	b.Logf("fresh array:  Go best %.0f median %.0f MB/s; Python best %.0f median %.0f MB/s", gfb, gfm, pfb, pfm)
	b.Logf("reused array: Go best %.0f median %.0f MB/s; Python best %.0f median %.0f MB/s", grb, grm, prb, prm)
	b.Logf("per CPU-second: fresh Go %.0f Python %.0f MB/cpu-s; reused Go %.0f Python %.0f MB/cpu-s", gfc, pfc, grc, prc)
}

func cpuSeconds() float64 {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
}
