package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/internal/bench"
)

func init() {
	register(&command{name: "bench-e2e", summary: "end-to-end ingest throughput: K producer processes → sidecar → sink (also `bench e2e`)", run: runBenchE2E})
	// `fzsidecar bench e2e` reaches this command without touching the GPU
	// bench's file (see subcommands in main.go).
	subcommands["bench e2e"] = "bench-e2e"
}

func runBenchE2E(ctx context.Context, args []string) error {
	fs := newFlags("bench-e2e", "bench e2e [--producers K] [--snapshots M] [--size S] [--sink null|DIR|URL] [--backend cpu|auto|gpu] [--json FILE]")
	producers := fs.Int("producers", 2, "producer processes (K)")
	snapshots := fs.Int("snapshots", 8, "snapshots per producer (M)")
	size := fs.String("size", "64MiB", "bytes per snapshot (S), f32; a multiple of 4")
	sink := fs.String("sink", "null", "null (discard), a directory (e.g. /dev/shm/x for tmpfs), or a sink URL")
	be := fs.String("backend", "cpu", "codec backend: cpu, auto or gpu")
	gpus := fs.String("gpus", "", "GPU devices, one pipeline each (e.g. 0,1 or all)")
	gpuHost := fs.String("gpu-host", "register", "how snapshots reach the GPU: register (pin segments in place) or stage (pinned ring)")
	gpuArena := fs.String("gpu-arena", "auto", "device input buffer per GPU lane")
	gpuLanes := fs.String("gpu-lanes", "4", "snapshots each GPU compresses at once")
	formatVersion := fs.String("format-version", "1", "container format version written: "+config.FormatVersions+" (as serve's format_version)")
	tiling := fs.String("tiling", "boxes", "tile geometry written: "+config.Tilings+" (as serve's tiling)")
	reuse := fs.Int("reuse-segments", 3, "segments each producer keeps for its next snapshots (0: a new file per snapshot)")
	fill := fs.String("fill", "copy", "what producers do per snapshot: copy (memcpy the field into the segment, as a simulation writes its output) or none (publish the reused segment as it is: the sidecar's own limit)")
	shmBase := fs.String("shm", "", "directory for the run's segments (default /dev/shm); e.g. a tmpfs mounted with huge=always")
	compressors := fs.Int("compressors", 0, "snapshots compressed at once (default: as serve)")
	writers := fs.Int("writers", 0, "concurrent sink writes (default: as serve)")
	threads := fs.Int("codec-threads", 0, "CPU codec threads per snapshot (0: all cores)")
	budget := fs.String("budget", "", "in-flight budget (default: enough for every stage and producer)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	// The producer role: what each of the K processes runs.
	role := fs.String("role", "", "internal: producer")
	url := fs.String("nats-url", "", "internal (producer role)")
	shm := fs.String("shm-dir", "", "internal (producer role)")
	id := fs.String("id", "", "internal (producer role)")
	index := fs.Int("index", 0, "internal (producer role)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected argument %q", pos[0])
	}
	n, err := parseSize(*size)
	if err != nil || n%4 != 0 {
		return usageErr(fs, "--size %q: expected a size that is a multiple of 4 bytes, e.g. 64MiB", *size)
	}
	if *fill != "copy" && *fill != "none" {
		return usageErr(fs, "--fill %q: expected copy or none", *fill)
	}
	if *role == "producer" {
		return bench.RunProducer(ctx, bench.ProducerOptions{URL: *url, ShmDir: *shm, ID: *id, Index: *index,
			Snapshots: *snapshots, Bytes: n, Reuse: *reuse, NoFill: *fill == "none"}, os.Stdin, os.Stdout)
	}
	if *role != "" {
		return usageErr(fs, "--role %q: expected producer (internal)", *role)
	}
	if *producers < 1 || *producers > 256 || *snapshots < 1 {
		return usageErr(fs, "--producers %d --snapshots %d: expected 1..256 producers and at least one snapshot", *producers, *snapshots)
	}
	var s config.Settings
	s, err = config.Load("", nil, func(s *config.Settings) error {
		// Reuse the config parsers so --backend and --gpus mean what they
		// mean for serve.
		return config.Set(s, map[string]string{"backend": *be, "gpus": *gpus, "gpu_host": *gpuHost, "gpu_arena": *gpuArena, "gpu_lanes": *gpuLanes, "format_version": *formatVersion, "tiling": *tiling}, "flag")
	})
	if err != nil {
		return configErr(fs.Name(), err)
	}
	var b int64
	if *budget != "" {
		if b, err = parseSize(*budget); err != nil {
			return usageErr(fs, "--budget: %v", err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	rep, err := bench.Run(ctx, bench.Options{Producers: *producers, Snapshots: *snapshots, Bytes: n, Sink: *sink,
		Backend: s.Backend, GPUs: s.GPUs, GPUHost: s.GPUHost, GPUArena: s.GPUArena, GPULanes: s.GPULanes, Reuse: *reuse, NoFill: *fill == "none", Compressors: *compressors, Writers: *writers, CodecThreads: *threads, FormatVersion: s.FormatVersion, Tiling: s.Tiling, Budget: b, ShmBase: *shmBase,
		// The producers are this binary again; FZSIDECAR_TEST_EXEC makes
		// that work from the test binary too.
		Exe: exe, Args: []string{"bench-e2e"}, Env: []string{"FZSIDECAR_TEST_EXEC=1"},
	})
	if err != nil {
		return err
	}
	bench.Print(os.Stdout, rep)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *jsonOut, err)
		}
	}
	return nil
}
