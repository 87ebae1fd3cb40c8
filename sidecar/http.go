package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// health is what /healthz reports.
type health struct {
	Status   string `json:"status"` // ok, starting, stopping, degraded
	NATS     string `json:"nats"`
	Consumer string `json:"consumer,omitempty"` // ok, or missing (deleted; being recreated)
	InFlight int    `json:"in_flight"`
	Budget   int64  `json:"budget_bytes"`
	Used     int64  `json:"budget_used_bytes"`
}

// serveHTTP serves /metrics and /healthz on ln until ctx ends. /healthz is
// 200 only while the sidecar takes snapshots, NATS is connected and the
// snapshot consumer exists, so an orchestrator's probe restarts a sidecar
// that lost its server for good.
func serveHTTP(ctx context.Context, ln net.Listener, m *Metrics, state func() health, log *slog.Logger) func() {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		h := state()
		w.Header().Set("Content-Type", "application/json")
		if h.Status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(h)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "fzsidecar: /metrics (Prometheus), /healthz")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
}

// listenMetrics opens the metrics address. A busy default address falls
// back to a free port on the same host (the endpoint is optional and two
// sidecars on one node should both start); a busy configured one is an
// error.
func listenMetrics(addr string, isDefault bool, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if !isDefault {
		return nil, fmt.Errorf("metrics.listen %s: %w (another sidecar? choose another address or off)", addr, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	ln, err2 := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err2 != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	log.Warn("default metrics address busy; serving metrics on a free port instead", "wanted", addr, "addr", ln.Addr().String())
	return ln, nil
}
