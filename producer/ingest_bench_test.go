package producer_test

// The throughput bench program fzproducer_ingest (examples/bench_ingest.c,
// run on a GPU host by examples/bench_gpu_host.sh) against a real
// `fzsidecar serve` on the CPU, small: every write mode stores every
// snapshot, counts what it wrote, and the fresh field it writes in place
// is the one stored (decoded and compared value by value).

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

type ingestReport struct {
	Producers int     `json:"producers"`
	Snapshots int     `json:"snapshots_per_producer"`
	Bytes     uint64  `json:"bytes_per_snapshot"`
	Write     string  `json:"write"`
	Stored    int     `json:"stored"`
	Raw       uint64  `json:"raw_bytes"`
	Comp      uint64  `json:"compressed_bytes"`
	Written   uint64  `json:"written_bytes"`
	Ingest    float64 `json:"ingest_bytes_per_second"`
}

// ingestField is bench_ingest.c's field (internal/synth's Fill32 in
// float32 steps) for producer vi at step t, dims nz x ny x nx.
func ingestField(vi int, t uint64, nz, ny, nx int) []float32 {
	pi2, ts, fv := 2*math.Pi, float64(t), float64(vi)
	w := make([]float32, nx)
	for i := range w {
		x := float64(i) / float64(nx)
		w[i] = float32(math.Sin(pi2*(x+0.02*ts+0.1*fv)) + 0.05*math.Sin(pi2*(7*x-0.05*ts)))
	}
	scale, off := 1+0.5*float32(vi), 0.1*float32(vi)
	v := make([]float32, 0, nz*ny*nx)
	for z := 0; z < nz; z++ {
		sz := float32(0.5 * math.Sin(pi2*(float64(z)/float64(nz)+0.01*ts)))
		for y := 0; y < ny; y++ {
			cy := float32(math.Cos(pi2 * (float64(y)/float64(ny) - 0.015*ts)))
			a, b := scale*cy, scale*sz+off
			for i := 0; i < nx; i++ {
				v = append(v, a*w[i]+b)
			}
		}
	}
	return v
}

func TestIngestBenchProgram(t *testing.T) {
	dir := build(t)
	prog := filepath.Join(dir, "fzproducer_ingest")
	sc := nativetest.Serve(t)
	const producers, snaps, inflight, size = 3, 4, 2, 512 << 10 // 2 x 256 x 256 f32
	for _, mode := range []string{"fresh", "store", "copy", "none"} {
		t.Run(mode, func(t *testing.T) {
			runName := "ingest-" + mode
			out, rc := run(t, 3*time.Minute, nil, prog, "--url", sc.URL, "--shm-dir", sc.ShmDir, "--producers", strconv.Itoa(producers),
				"--snapshots", strconv.Itoa(snaps), "--inflight", strconv.Itoa(inflight), "--bytes", strconv.Itoa(size),
				"--write", mode, "--threads", "2", "--run", runName)
			if rc != 0 {
				t.Fatalf("fzproducer_ingest --write %s: exit %d\n%s", mode, rc, out)
			}
			_, js, ok := strings.Cut(out, "INGEST_JSON ")
			var r ingestReport
			if !ok || json.Unmarshal([]byte(strings.TrimSpace(js)), &r) != nil {
				t.Fatalf("no INGEST_JSON line:\n%s", out)
			}
			n := producers * snaps
			wantWritten := uint64(n * size)
			if mode == "none" {
				wantWritten = 0 // every measured snapshot reuses a warm-up segment
			}
			if r.Stored != n || r.Raw != uint64(n*size) || r.Comp == 0 || r.Comp >= r.Raw || r.Written != wantWritten || r.Ingest <= 0 {
				t.Fatalf("report %+v: want %d stored, %d raw bytes, %d written\n%s", r, n, n*size, wantWritten, out)
			}
			for p := 0; p < producers; p++ {
				varName := fmt.Sprintf("%s-p%d", runName, p)
				rows := listSteps(t, sc, runName, varName)
				if len(rows) != snaps || fmt.Sprint(rows[0].Dims) != "[2 256 256]" {
					t.Fatalf("%s: stored %+v, want %d steps of [2 256 256]", varName, rows, snaps)
				}
				if mode != "fresh" && mode != "store" {
					continue
				}
				// Step i is the field's step inflight+i (the warm-up wrote 0..inflight-1).
				for _, row := range []lsRow{rows[0], rows[snaps-1]} {
					want := ingestField(p, uint64(inflight)+row.Step, 2, 256, 256)
					got := getValues(t, sc, runName, varName, row.Step, "f32")
					tol := row.AbsEB * (1 + 1e-6)
					for i := range want {
						if d := math.Abs(got[i] - float64(want[i])); d > tol+1e-6*math.Abs(float64(want[i])) {
							t.Fatalf("%s step %d value %d: got %g, want %g within %g", varName, row.Step, i, got[i], want[i], row.AbsEB)
						}
					}
				}
			}
		})
	}
	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{
			{"--write", "bogus", "--shm-dir", sc.ShmDir},
			{"--producers", "0", "--shm-dir", sc.ShmDir},
			{"--bytes", "6", "--shm-dir", sc.ShmDir},
			{"--producers", "2"},
			{"--shm-dir"},
		} {
			out, rc := run(t, 30*time.Second, nil, prog, args...)
			if rc != 2 || !strings.Contains(out, "usage:") {
				t.Errorf("fzproducer_ingest %v: exit %d, want 2 with usage\n%s", args, rc, out)
			}
		}
	})
}
