// Package demo is `fzsidecar demo`: the whole path a new user should see
// work, in one process and well under a minute, on any machine — start the
// sidecar with defaults (embedded NATS, CPU when there is no GPU), run a
// simulated producer, store to a local sink, restore the latest step, check
// every value against its error bound, and print a short table.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/retrieve"
	"github.com/fzsidecar/fzsidecar/internal/simulate"
	"github.com/fzsidecar/fzsidecar/sidecar"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// Options of the demo; zero values take the defaults in Defaults.
type Options struct {
	Sink    string // default ./fzdata
	Run     string // default demo-<timestamp>
	Vars    []string
	Steps   int
	Dims    []uint64
	Mode    fz.Mode
	Bound   float64
	Backend string // auto, cpu, gpu
	// Listen is the embedded NATS address; if it is busy a free loopback
	// port is used instead (the demo's producer is in-process).
	Listen string
	Out    io.Writer // the table
	Log    *slog.Logger
}

// Defaults: 3 variables × 4 steps of 64×128×128 f32 (4 MiB each), relative
// bound 1e-3.
func Defaults() Options {
	return Options{Sink: "./fzdata", Run: "demo-" + time.Now().Format("20060102-150405"),
		Vars: []string{"temperature", "pressure", "density"}, Steps: 4, Dims: []uint64{64, 128, 128},
		Mode: fz.Rel, Bound: 1e-3, Backend: "auto", Listen: "127.0.0.1:4222"}
}

// Row is one variable of the restored step.
type Row struct {
	Var         string
	Step        uint64
	Raw, Stored uint64
	MaxErr, EB  float64
	Violations  uint64
}

// Report is what the demo measured.
type Report struct {
	Backend    string
	Stored     int
	Failed     int
	Raw, Comp  uint64
	Elapsed    time.Duration // first publish → last result
	LatestStep uint64
	Rows       []Row
	Problems   []string
}

// OK is true when every snapshot was stored and every restored value is
// within its bound.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Run performs the demo and prints the table to o.Out. The error is
// non-nil when something could not run at all; failed checks are in
// Report.Problems (and the table).
func Run(ctx context.Context, o Options) (*Report, error) {
	d := Defaults()
	if o.Sink == "" {
		o.Sink = d.Sink
	}
	if o.Run == "" {
		o.Run = d.Run
	}
	if len(o.Vars) == 0 {
		o.Vars = d.Vars
	}
	if o.Steps <= 0 {
		o.Steps = d.Steps
	}
	if len(o.Dims) == 0 {
		o.Dims = d.Dims
	}
	if o.Bound <= 0 {
		o.Mode, o.Bound = d.Mode, d.Bound
	}
	if o.Backend == "" {
		o.Backend = d.Backend
	}
	if o.Listen == "" {
		o.Listen = d.Listen
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	// Private shared-memory and state directories: the demo must not mix
	// with a sidecar already running on this node, and leaves nothing
	// behind but the sink.
	shm, err := shmDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(shm)
	state, err := os.MkdirTemp("", "fzsidecar-demo-state-")
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	defer os.RemoveAll(state)

	s := config.Defaults()
	s.Sink, s.ShmDir, s.DataDir, s.Backend = o.Sink, shm, state, o.Backend
	s.NATS.Listen = freeOr(o.Listen)
	s.Metrics.Listen = "off"
	s.Budget = 1 << 30
	a, err := sidecar.FromSettings(ctx, s, o.Log)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	rep := &Report{Backend: a.BackendName}

	ready := make(chan string, 1)
	a.Ready = func(url string) { ready <- url }
	sctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- sidecar.Run(sctx, a.Config) }()
	defer func() {
		stop()
		<-ran
	}()
	var url string
	select {
	case url = <-ready:
	case err := <-ran:
		return nil, fmt.Errorf("sidecar: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(cctx, ingest.ConnOptions{URL: url, Name: "fzsidecar demo", ShmDir: shm, Log: o.Log})
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	prod, err := ingest.NewProducer(cctx, nc, ingest.ProducerOptions{ID: "demo", ShmDir: shm, Log: o.Log})
	if err != nil {
		return nil, err
	}
	defer prod.Close()

	dims := fz.FormatDims(o.Dims)
	n, _ := fz.NumElements(o.Dims)
	fmt.Fprintf(o.Out, "fzsidecar demo: %d variables × %d steps of %s f32 (%s each), %s bound %g\n",
		len(o.Vars), o.Steps, dims, mb(n*4), o.Mode, o.Bound)
	fmt.Fprintf(o.Out, "sidecar: embedded NATS %s, shm %s, backend %s, sink %s (run %s)\n\n",
		url, shm, a.BackendName, a.Sink.String(), o.Run)

	start := time.Now()
	err = simulate.Run(ctx, prod, simulate.Options{Run: o.Run, Vars: o.Vars, Steps: o.Steps, Dims: o.Dims,
		DType: fz.Float32, Mode: o.Mode, Bound: o.Bound, Timeout: 2 * time.Minute}, func(e simulate.Event) {
		if e.Err != nil {
			rep.Failed++
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s step %d: %v", e.Spec.Var, e.Spec.Step, e.Err))
			return
		}
		rep.Stored++
		rep.Raw += e.Result.RawBytes
		rep.Comp += e.Result.CompressedBytes
	})
	rep.Elapsed = time.Since(start)
	if err != nil {
		return rep, err
	}
	if err := restoreAndVerify(ctx, a.Sink, o, rep); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
	print(o.Out, rep)
	return rep, nil
}

// restoreAndVerify restores the latest step as `fzsidecar restore` does
// and checks each variable against the field the producer wrote.
func restoreAndVerify(ctx context.Context, sink sinks.Sink, o Options, rep *Report) error {
	step, err := sinks.Latest(ctx, sink, o.Run, "")
	if err != nil {
		return fmt.Errorf("latest step: %w", err)
	}
	rep.LatestStep = step
	dir, err := os.MkdirTemp("", "fzsidecar-demo-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	man, err := retrieve.Restore(ctx, sink, o.Run, step, dir, retrieve.RestoreOptions{Jobs: 2})
	if err != nil {
		return fmt.Errorf("restore step %d: %w", step, err)
	}
	if len(man.Vars) != len(o.Vars) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("restored %d variables, want %d", len(man.Vars), len(o.Vars)))
	}
	index := map[string]int{}
	for i, v := range o.Vars {
		index[v] = i
	}
	for _, v := range man.Vars {
		raw, err := os.ReadFile(filepath.Join(dir, v.File))
		if err != nil {
			return err
		}
		k := sinks.Key{Run: o.Run, Var: v.Var, Step: step}
		h, err := retrieve.ReadHeader(ctx, sink, k)
		if err != nil {
			return err
		}
		meta, err := sink.Stat(ctx, k)
		if err != nil {
			return err
		}
		want := simulate.Field(o.Dims, fz.Float32, index[v.Var], step)
		q, err := fz.Verify(h, want, raw)
		if err != nil {
			return fmt.Errorf("%s: %w", v.Var, err)
		}
		rep.Rows = append(rep.Rows, Row{Var: v.Var, Step: step, Raw: uint64(len(raw)), Stored: meta.Stored,
			MaxErr: q.MaxAbsErr, EB: h.AbsEB, Violations: q.Violations})
		if q.Violations > 0 || !(q.MaxAbsErr <= h.AbsEB) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s step %d: %d values off the bound %g (max error %g)",
				v.Var, step, q.Violations, h.AbsEB, q.MaxAbsErr))
		}
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return index[rep.Rows[i].Var] < index[rep.Rows[j].Var] })
	return nil
}

func print(w io.Writer, r *Report) {
	fmt.Fprintf(w, "%-14s %5s %9s %10s %7s %13s %11s\n", "variable", "step", "raw MB", "stored MB", "ratio", "max err / eb", "violations")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-14s %5d %9.2f %10.3f %7.2f %13.3f %11d\n", row.Var, row.Step, float64(row.Raw)/1e6,
			float64(row.Stored)/1e6, float64(row.Raw)/math.Max(float64(row.Stored), 1), row.MaxErr/row.EB, row.Violations)
	}
	ratio := 0.0
	if r.Comp > 0 {
		ratio = float64(r.Raw) / float64(r.Comp)
	}
	secs := r.Elapsed.Seconds()
	fmt.Fprintf(w, "\ntotal: %d snapshots stored, %d failed; %.1f MB -> %.2f MB (ratio %.2f) in %.2fs: %.1f MB/s from publish to durable store on %d cores (backend %s)\n",
		r.Stored, r.Failed, float64(r.Raw)/1e6, float64(r.Comp)/1e6, ratio, secs, float64(r.Raw)/secs/1e6, runtime.GOMAXPROCS(0), r.Backend)
	if r.OK() {
		fmt.Fprintf(w, "PASS: every snapshot stored; step %d restored and every value within its error bound\n", r.LatestStep)
		return
	}
	fmt.Fprintf(w, "FAIL:\n  %s\n", strings.Join(r.Problems, "\n  "))
}

// shmDir is a private directory in /dev/shm, or in the temp directory on
// machines without /dev/shm (macOS, some containers): slower than tmpfs but
// the protocol only needs a shared, mappable file.
func shmDir() (string, error) { return shmDirIn("/dev/shm") }

func shmDirIn(shm string) (string, error) {
	if st, err := os.Stat(shm); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp(shm, "fzsidecar-demo-"); err == nil {
			return d, nil
		}
	}
	d, err := os.MkdirTemp("", "fzsidecar-demo-shm-")
	if err != nil {
		return "", fmt.Errorf("no /dev/shm and no temp directory for segments: %w", err)
	}
	return d, nil
}

// freeOr returns addr if it can be listened on, else a free loopback port.
func freeOr(addr string) string {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		l.Close()
		return addr
	}
	return "127.0.0.1:0"
}

func mb(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// ErrFailed is returned by callers when the report has problems.
var ErrFailed = errors.New("demo checks failed")
