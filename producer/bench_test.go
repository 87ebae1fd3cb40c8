package producer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// BenchmarkProducer compares the C producer (libfzproducer, through the
// fzproducer_bench program) with the Go producer (ingest.Producer, in this
// process) on the same loop against one real `fzsidecar serve`: per
// snapshot, begin, write the field into the reused segment (a memcpy of a
// precomputed f32 field), publish, wait for the result. Metrics:
// latency-ms (publish call to result; mean, p50, p90), cpu-ms/op (user +
// sys CPU of the producer process per snapshot, the fill included) and
// fill-ms/op (wall time of the memcpy into the segment). ns/op of the c
// runs includes starting the program, connecting and its warm-up.
//
//	go test ./producer/ -run '^$' -bench Producer -benchtime 20x
func BenchmarkProducer(b *testing.B) {
	dir := build(b)
	sc := nativetest.Serve(b)
	for _, size := range []int64{4 << 20, 64 << 20} {
		for _, lang := range []string{"c", "go"} {
			b.Run(fmt.Sprintf("%s/%dMiB", lang, size>>20), func(b *testing.B) {
				var r benchReport
				if lang == "c" {
					r = benchC(b, dir, sc, size)
				} else {
					r = benchGo(b, sc, size)
				}
				b.ReportMetric(r.Mean, "latency-ms")
				b.ReportMetric(r.P50, "p50-latency-ms")
				b.ReportMetric(r.P90, "p90-latency-ms")
				b.ReportMetric(r.CPU, "cpu-ms/op")
				b.ReportMetric(r.Fill, "fill-ms/op")
			})
		}
	}
}

// benchReport is what examples/bench.c prints, and what benchGo computes
// the same way.
type benchReport struct {
	Snapshots int     `json:"snapshots"`
	Mean      float64 `json:"latency_ms_mean"`
	P50       float64 `json:"latency_ms_p50"`
	P90       float64 `json:"latency_ms_p90"`
	CPU       float64 `json:"cpu_ms_per_snapshot"`
	Fill      float64 `json:"fill_ms_per_snapshot"`
}

// benchC runs fzproducer_bench for b.N snapshots.
func benchC(b *testing.B, dir string, sc *nativetest.Sidecar, size int64) benchReport {
	out, rc := run(b, 10*time.Minute, nil, filepath.Join(dir, "fzproducer_bench"), "--url", sc.URL, "--shm-dir", sc.ShmDir,
		"--id", fmt.Sprintf("cbench-%dMiB", size>>20), "--bytes", strconv.FormatInt(size, 10), "--snapshots", strconv.Itoa(b.N))
	if rc != 0 {
		b.Fatalf("fzproducer_bench: exit %d\n%s", rc, out)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Snapshots != b.N {
		b.Fatalf("fzproducer_bench output: %v\n%s", err, out)
	}
	return r
}

// benchField is the field of examples/bench.c.
func benchField(n int64) []byte {
	buf := make([]byte, n)
	v := fz.ViewFloats[float32](buf)
	for i := range v {
		v[i] = float32(50*math.Sin(float64(i)*0.0007) + 20*math.Cos(float64(i)*0.00013))
	}
	return buf
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)*1e-6
}

func benchGo(b *testing.B, sc *nativetest.Sidecar, size int64) benchReport {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: sc.URL, ShmDir: sc.ShmDir, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	prod, err := ingest.NewProducer(ctx, nc, ingest.ProducerOptions{ID: fmt.Sprintf("gobench-%dMiB", size>>20), ShmDir: sc.ShmDir, ReuseSegments: 2, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	src := benchField(size)
	dims := []uint64{uint64(size / 4)}
	if e := uint64(size / 4); e%(256*256) == 0 {
		dims = []uint64{e / (256 * 256), 256, 256}
	}
	const warmup = 2
	lat := make([]float64, 0, b.N)
	var cpu0, fill float64
	for k := -warmup; k < b.N; k++ {
		if k == 0 {
			b.ResetTimer()
			cpu0 = cpuSeconds()
		}
		snap, err := prod.Begin(ctx, ingest.Spec{Run: "bench", Var: fmt.Sprintf("gobench-%dMiB", size>>20), Step: uint64(k + warmup), DType: fz.Float32,
			Dims: dims, Mode: fz.Rel, Bound: 1e-3})
		if err != nil {
			b.Fatal(err)
		}
		tf := time.Now()
		copy(snap.Bytes(), src)
		t := time.Now()
		if k >= 0 {
			fill += t.Sub(tf).Seconds() * 1e3
		}
		pd, err := snap.Publish(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pd.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if k >= 0 {
			lat = append(lat, float64(time.Since(t).Microseconds())/1e3)
		}
	}
	cpu := (cpuSeconds() - cpu0) * 1e3 / float64(b.N)
	r := benchReport{Snapshots: b.N, CPU: cpu, Fill: fill / float64(b.N)}
	for _, l := range lat {
		r.Mean += l
	}
	r.Mean /= float64(len(lat))
	sort.Float64s(lat)
	r.P50, r.P90 = lat[len(lat)/2], lat[len(lat)*9/10]
	return r
}
