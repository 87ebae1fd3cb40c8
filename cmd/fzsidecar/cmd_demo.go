package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/demo"
)

func init() {
	register(&command{name: "demo", summary: "start here: run the sidecar and a simulated producer, store to ./fzdata, restore and verify", run: runDemo})
}

func runDemo(ctx context.Context, args []string) error {
	d := demo.Defaults()
	fs := newFlags("demo", "demo [--sink ./fzdata] [--steps 4] [--vars a,b,c] [--dims 64x128x128] [--backend auto|cpu|gpu]")
	sink := fs.String("sink", d.Sink, "where the demo stores (a path, file:///path or s3://bucket/prefix)")
	run := fs.String("run", "", "run name (default demo-<date>-<time>)")
	vars := fs.String("vars", strings.Join(d.Vars, ","), "comma-separated variable names")
	steps := fs.Int("steps", d.Steps, "time steps")
	dimsStr := fs.String("dims", fz.FormatDims(d.Dims), "dimensions of every field (f32), slowest to fastest")
	eb := fs.Float64("eb", d.Bound, "relative error bound")
	backend := fs.String("backend", d.Backend, "codec backend: auto, cpu or gpu")
	listen := fs.String("nats-listen", d.Listen, "embedded NATS address (a free port is used if it is busy)")
	verbose := fs.Bool("v", false, "show the sidecar's log")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected argument %q", pos[0])
	}
	o := demo.Options{Sink: *sink, Run: *run, Steps: *steps, Bound: *eb, Mode: fz.Rel, Backend: *backend, Listen: *listen, Out: os.Stdout}
	for _, v := range strings.Split(*vars, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return usageErr(fs, "--vars %q: expected names separated by commas", *vars)
		}
		o.Vars = append(o.Vars, v)
	}
	if *steps < 1 || *steps > 1000 {
		return usageErr(fs, "--steps %d: expected 1 to 1000", *steps)
	}
	if !(*eb > 0 && *eb < 1) {
		return usageErr(fs, "--eb %v: expected a relative bound between 0 and 1, e.g. 1e-3", *eb)
	}
	if o.Dims, err = fz.ParseDims(*dimsStr); err != nil {
		return usageErr(fs, "--dims: %v", err)
	}
	if *verbose {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	rep, err := demo.Run(ctx, o)
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("%w (%d problems, listed above)", demo.ErrFailed, len(rep.Problems))
	}
	return nil
}
