package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/sidecar"
)

func init() {
	register(&command{name: "serve", summary: "run the sidecar: take shared-memory snapshots from NATS, compress, store", run: runServe})
}

// serveSynopsis lists the common flags; --help prints every one with its
// environment variable and default.
const serveSynopsis = "serve [--config FILE] [--nats-listen ADDR | --nats-url URL] [--shm-dir DIR] [--sink URL] [--backend auto|cpu|gpu] [flags]\n\n" +
	"Settings come from flags > environment (FZ_*) > the --config YAML file (or $FZ_CONFIG) > defaults;\n" +
	"configs/sidecar.yaml documents every key.\n\n" +
	"With the embedded NATS server and no credentials configured, only producers of this Unix user can\n" +
	"connect: they log in with <shm-dir>/.fzsidecar-auth (mode 0600), written at start (docs/PROTOCOL.md §1)."

func runServe(ctx context.Context, args []string) error {
	fs := newFlags("serve", serveSynopsis)
	file, apply := config.Flags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected argument %q", pos[0])
	}
	path := *file
	if path == "" {
		path = os.Getenv("FZ_CONFIG")
	}
	s, err := config.Load(path, os.Getenv, apply)
	if err != nil {
		return configErr(fs.Name(), err)
	}
	log := sidecar.NewLogger(os.Stderr, s)
	a, err := sidecar.FromSettings(ctx, s, log)
	if err != nil {
		return configErr(fs.Name(), err)
	}
	defer a.Close()
	log.Info("starting", "sink", a.Sink.String(), "backend", a.BackendName, "format_version", s.FormatVersion, "tiling", s.Tiling, "config", path)
	metrics := "off"
	a.MetricsReady = func(addr string) { metrics = "http://" + addr + "/metrics" }
	a.Ready = func(url string) {
		// One line on stdout that scripts can wait for.
		fmt.Printf("fzsidecar ready: nats %s, shm %s, sink %s, metrics %s\n", url, s.ShmDir, a.Sink.String(), metrics)
	}
	return sidecar.Run(ctx, a.Config)
}

// configErr reports a bad setting as a usage error (exit 2) without the
// whole flag list: the message already names the key and what it expects.
func configErr(cmd string, err error) error {
	if errors.Is(err, config.ErrConfig) {
		fmt.Fprintf(os.Stderr, "fzsidecar %s: %v\n", cmd, err)
		return errUsage
	}
	return err
}
