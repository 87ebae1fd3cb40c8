// Package sidecar assembles the running sidecar: NATS (embedded or
// external), the ingest receiver and a pipeline. Commands and tests start it
// the same way, so what the tests exercise is what `fzsidecar serve` runs.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/nats-io/nats-server/v2/server"
)

// Config is everything Run needs.
type Config struct {
	// Embedded starts an in-process NATS server when true; otherwise Conn.URL
	// names an external one.
	Embedded bool
	// Listen and DataDir configure the embedded server (JetStream store in
	// <DataDir>/jetstream).
	Listen  string
	DataDir string
	// TLS cert/key for the embedded server.
	TLSCert, TLSKey string
	Conn            ingest.ConnOptions
	Receiver        ingest.ReceiverConfig
	Pipeline        pipeline.Config
	Log             *slog.Logger
	// Ready, if set, is called once the sidecar accepts snapshots, with the
	// URL producers should use.
	Ready func(url string)
}

// Run serves until ctx ends, then shuts down in order: stop taking
// snapshots, hand back what is in flight, close NATS.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	cfg.Conn.Log, cfg.Receiver.Log, cfg.Pipeline.Log = log, log, log
	if cfg.Receiver.MaxInFlight <= 0 {
		// Enough jobs out that every pipeline stage can be busy; no more,
		// so the rest of the queue waits on disk in JetStream.
		cfg.Receiver.MaxInFlight = cfg.Pipeline.InFlight()
	}
	if cfg.Conn.Name == "" {
		cfg.Conn.Name = "fzsidecar"
	}
	var ns *server.Server
	if cfg.Embedded {
		dataDir := cfg.DataDir
		if dataDir == "" {
			dataDir = ".fzsidecar"
		}
		var err error
		ns, err = ingest.StartServer(ingest.ServerConfig{
			Listen: cfg.Listen, StoreDir: filepath.Join(dataDir, "jetstream"), Auth: cfg.Conn,
			TLSCert: cfg.TLSCert, TLSKey: cfg.TLSKey, Log: log,
		})
		if err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		}()
		cfg.Conn.URL = ns.ClientURL()
		log.Info("embedded NATS server ready", "url", cfg.Conn.URL, "store", filepath.Join(dataDir, "jetstream"))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	nc, err := ingest.Connect(cctx, cfg.Conn)
	cancel()
	if err != nil {
		return err
	}
	defer nc.Close()

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	recv, err := ingest.NewReceiver(rctx, nc, cfg.Receiver)
	cancel()
	if err != nil {
		return fmt.Errorf("start receiver: %w", err)
	}
	defer recv.Close()

	jobs := make(chan *ingest.Job)
	recvDone := make(chan error, 1)
	go func() { recvDone <- recv.Run(ctx, jobs) }()
	log.Info("sidecar ready", "nats", cfg.Conn.URL, "shm_dir", recv.ShmDir().Path(),
		"budget_bytes", recv.Budget().Limit(), "subjects", cfg.Receiver.Subjects.SnapshotWildcard())
	if cfg.Ready != nil {
		cfg.Ready(cfg.Conn.URL)
	}
	perr := pipeline.Run(ctx, jobs, cfg.Pipeline)
	rerr := <-recvDone
	if err := nc.Drain(); err != nil && !errors.Is(err, context.Canceled) {
		log.Debug("nats drain", "err", err)
	}
	log.Info("sidecar stopped")
	return errors.Join(perr, rerr)
}
