// Package sidecar assembles the running sidecar: NATS (embedded or
// external), the ingest receiver, the pipeline, and the metrics/health
// endpoint. Commands and tests start it the same way, so what the tests
// exercise is what `fzsidecar serve` runs.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Config is everything Run needs.
type Config struct {
	// Embedded starts an in-process NATS server when true; otherwise Conn.URL
	// names an external one.
	Embedded bool
	// LocalAuth secures an embedded server that has no credentials
	// configured: two users and a producers' credentials file in the shm
	// dir (ingest.LocalAuth, docs/PROTOCOL.md §1). FromSettings turns it on
	// whenever it applies; Conn must then carry no credentials.
	LocalAuth bool
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
	// MetricsListen, if not "" or "off", serves /metrics and /healthz there;
	// MetricsDefault says it is the default address (a busy one then falls
	// back to a free port instead of failing).
	MetricsListen  string
	MetricsDefault bool
	// Metrics, if nil, is created when MetricsListen is set.
	Metrics *Metrics
	// Ready, if set, is called once the sidecar accepts snapshots, with the
	// URL producers should use.
	Ready func(url string)
	// MetricsReady, if set, is called with the metrics address once it
	// listens.
	MetricsReady func(addr string)
}

// Run serves until ctx ends, then shuts down in order: stop taking
// snapshots, finish (or after the drain timeout hand back) what is in
// flight, close NATS.
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
	var (
		state atomic.Value // string: starting, ok, stopping
		recv  atomic.Pointer[ingest.Receiver]
		conn  atomic.Pointer[nats.Conn]
	)
	state.Store("starting")
	if cfg.MetricsListen != "" && cfg.MetricsListen != "off" {
		if cfg.Metrics == nil {
			cfg.Metrics = NewMetrics()
		}
		ln, err := listenMetrics(cfg.MetricsListen, cfg.MetricsDefault, log)
		if err != nil {
			return err
		}
		stop := serveHTTP(ctx, ln, cfg.Metrics, func() health {
			h := health{Status: state.Load().(string), NATS: "not connected"}
			if nc := conn.Load(); nc != nil {
				h.NATS = nc.Status().String()
				if h.Status == "ok" && nc.Status() != nats.CONNECTED {
					h.Status = "degraded"
				}
			}
			if r := recv.Load(); r != nil {
				h.Consumer = "ok"
				if r.ConsumerMissing() { // deleted; being recreated
					h.Consumer = "missing"
					if h.Status == "ok" {
						h.Status = "degraded"
					}
				}
				h.InFlight = r.InFlight()
				h.Budget = r.Budget().Limit()
				h.Used, _ = r.Budget().Used()
			}
			return h
		}, log)
		defer stop()
		addr := ln.Addr().(*net.TCPAddr).String()
		log.Info("metrics and health endpoint", "url", "http://"+addr+"/metrics")
		if cfg.MetricsReady != nil {
			cfg.MetricsReady(addr)
		}
	}
	if cfg.Metrics != nil {
		if cfg.Pipeline.Observer == nil {
			cfg.Pipeline.Observer = cfg.Metrics
		}
		if prev := cfg.Receiver.OnReject; prev != nil {
			cfg.Receiver.OnReject = func(c ingest.Code) { prev(c); cfg.Metrics.rejected(c) }
		} else {
			cfg.Receiver.OnReject = cfg.Metrics.rejected
		}
	}

	var ns *server.Server
	if cfg.Embedded {
		dataDir := cfg.DataDir
		if dataDir == "" {
			dataDir = ".fzsidecar"
		}
		local, err := newLocalAuth(cfg, log)
		if err != nil {
			return err
		}
		ns, err = ingest.StartServer(ingest.ServerConfig{
			Listen: cfg.Listen, StoreDir: filepath.Join(dataDir, "jetstream"), Auth: cfg.Conn, Local: local,
			TLSCert: cfg.TLSCert, TLSKey: cfg.TLSKey, Log: log,
		})
		if err != nil {
			return err
		}
		if local != nil {
			cfg.Conn = local.SidecarConn(cfg.Conn)
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
	conn.Store(nc)

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	r, err := ingest.NewReceiver(rctx, nc, cfg.Receiver)
	cancel()
	if err != nil {
		return fmt.Errorf("start receiver: %w", err)
	}
	defer r.Close()
	recv.Store(r)
	if cfg.Metrics != nil {
		cfg.Metrics.watchBudget(r.Budget(), r.InFlight)
		cfg.Metrics.watchConsumer(r)
	}

	jobs := make(chan *ingest.Job)
	recvDone := make(chan error, 1)
	go func() { recvDone <- r.Run(ctx, jobs) }()
	log.Info("sidecar ready", "nats", cfg.Conn.URL, "shm_dir", r.ShmDir().Path(),
		"budget_bytes", r.Budget().Limit(), "subjects", cfg.Receiver.Subjects.SnapshotWildcard(),
		"max_in_flight", cfg.Receiver.MaxInFlight)
	state.Store("ok")
	if cfg.Ready != nil {
		cfg.Ready(cfg.Conn.URL)
	}
	stopping := context.AfterFunc(ctx, func() {
		state.Store("stopping")
		log.Info("shutting down: no new snapshots; finishing those in flight", "in_flight", r.InFlight(),
			"drain_timeout", cfg.Pipeline.DrainTimeout)
	})
	defer stopping()
	perr := pipeline.Run(ctx, jobs, cfg.Pipeline)
	rerr := <-recvDone
	if err := nc.Drain(); err != nil && !errors.Is(err, context.Canceled) {
		log.Debug("nats drain", "err", err)
	}
	log.Info("sidecar stopped")
	return errors.Join(perr, rerr)
}
