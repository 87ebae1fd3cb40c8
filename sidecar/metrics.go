package sidecar

import (
	"sync/atomic"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is the sidecar's Prometheus instrumentation. It implements
// pipeline.Observer and counts receiver rejections, so every snapshot shows
// up exactly once in fzsidecar_snapshots_total whatever became of it.
type Metrics struct {
	Registry  *prometheus.Registry
	snapshots *prometheus.CounterVec
	errors    *prometheus.CounterVec
	bytesIn   prometheus.Counter
	bytesOut  prometheus.Counter
	stage     *prometheus.HistogramVec
	depth     *prometheus.GaugeVec
	ratio     prometheus.Histogram
	in, out   atomic.Uint64 // for the cumulative ratio gauge
}

// NewMetrics registers every metric on a fresh registry (plus Go runtime
// and process metrics), so several sidecars in one test process do not
// collide on the global one.
func NewMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.snapshots = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fzsidecar_snapshots_total",
		Help: "Snapshots finished, by outcome: stored (committed and acked), failed (error result), retried (handed back to JetStream), rejected (bad notification)."},
		[]string{"outcome"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fzsidecar_errors_total",
		Help: "Errors by kind: the protocol error code (invalid, size_mismatch, conflict, store_failed, ...), gave_up (transient sink trouble outlasted max_deliver; answered store_failed), transient (sink trouble, retried), shutdown, or result (result/ack not confirmed)."},
		[]string{"kind"})
	m.bytesIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "fzsidecar_bytes_in_total", Help: "Raw bytes of stored snapshots."})
	m.bytesOut = prometheus.NewCounter(prometheus.CounterOpts{Name: "fzsidecar_bytes_out_total", Help: "Compressed bytes stored."})
	m.stage = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fzsidecar_stage_seconds",
		Help:    "Time a snapshot spends per stage: wait (queued for a compressor), load (map + copy from shm), compress, queue (waiting for a writer), store (sink put), result (reply + ack), total (received to acked).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20)}, []string{"stage"})
	m.depth = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fzsidecar_queue_depth",
		Help: "Snapshots currently in each stage: wait (taken, waiting for a compressor), compress, queue (compressed, waiting for a writer), store."},
		[]string{"stage"})
	m.ratio = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fzsidecar_compression_ratio",
		Help: "Compression ratio (raw / compressed) per stored snapshot.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)})
	cum := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fzsidecar_ratio",
		Help: "Cumulative compression ratio: bytes in / bytes out since start."}, func() float64 {
		if o := m.out.Load(); o > 0 {
			return float64(m.in.Load()) / float64(o)
		}
		return 0
	})
	m.Registry.MustRegister(m.snapshots, m.errors, m.bytesIn, m.bytesOut, m.stage, m.depth, m.ratio, cum,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series exist from the start, so dashboards and alerts see zeros
	// rather than absent data.
	for _, o := range []string{"stored", "failed", "retried", "rejected"} {
		m.snapshots.WithLabelValues(o)
	}
	for _, s := range []pipeline.Stage{pipeline.StageWait, pipeline.StageCompress, pipeline.StageQueue, pipeline.StageStore} {
		m.depth.WithLabelValues(string(s))
	}
	return m
}

// Budget exports the receiver's budget as gauges.
func (m *Metrics) watchBudget(b *ingest.Budget, inFlight func() int) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fzsidecar_budget_bytes", Help: "The in-flight byte budget."},
			func() float64 { return float64(b.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fzsidecar_budget_used_bytes", Help: "Bytes admitted or announced and not yet answered."},
			func() float64 { u, _ := b.Used(); return float64(u) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fzsidecar_in_flight", Help: "Snapshots taken from JetStream and not yet finished."},
			func() float64 { return float64(inFlight()) }),
	)
}

// watchConsumer exports the snapshot consumer's watchdog: alert on
// missing, count recreations.
func (m *Metrics) watchConsumer(r *ingest.Receiver) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fzsidecar_consumer_missing",
			Help: "1 while the snapshot consumer is deleted and not yet recreated (nothing is consumed)."},
			func() float64 {
				if r.ConsumerMissing() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fzsidecar_consumer_recreated_total",
			Help: "Snapshot consumers recreated after someone deleted them."},
			func() float64 { return float64(r.ConsumersRecreated()) }),
	)
}

func (m *Metrics) Stage(s pipeline.Stage, d time.Duration) {
	m.stage.WithLabelValues(string(s)).Observe(d.Seconds())
}
func (m *Metrics) Depth(s pipeline.Stage, delta int) {
	m.depth.WithLabelValues(string(s)).Add(float64(delta))
}

func (m *Metrics) Done(o pipeline.Outcome, kind string, st fz.Stats) {
	m.snapshots.WithLabelValues(string(o)).Inc()
	if kind != "" {
		m.errors.WithLabelValues(kind).Inc()
	}
	if o == pipeline.Stored {
		m.bytesIn.Add(float64(st.RawBytes))
		m.bytesOut.Add(float64(st.CompressedBytes))
		m.in.Add(st.RawBytes)
		m.out.Add(st.CompressedBytes)
		if r := st.Ratio(); r > 0 {
			m.ratio.Observe(r)
		}
	}
}

// rejected counts a notification the receiver answered with an error
// before it reached the pipeline.
func (m *Metrics) rejected(code ingest.Code) {
	m.snapshots.WithLabelValues("rejected").Inc()
	m.errors.WithLabelValues(string(code)).Inc()
}

var _ pipeline.Observer = (*Metrics)(nil)
