// Package pipeline turns ingested snapshots into stored, compressed objects.
//
// Snapshots flow through bounded stages:
//
//	receiver ─jobs─▶ dispatch ─▶ compress ×Compressors ─▶ store queue ─▶ store ×Writers ─▶ result + ack
//	                 (per-key     (map, private copy,      (Queue slots)   (create-only put,
//	                  order)       fz.Compress)                              then reply/ack)
//
// Every hand-off is a channel of fixed capacity and the receiver hands out
// at most MaxInFlight jobs, so a slow sink fills the store queue, stalls the
// compressors, stops the receiver fetching, and leaves new notifications on
// disk in JetStream; their bytes stay charged to the in-flight budget, so
// producers' admissions block (or fail, per policy). Memory never grows with
// load. A snapshot's result is published and its notification acked only
// after the sink committed it.
//
// Run(ctx, jobs, Config) is the seam the sidecar calls; Codec and Store are
// what it consumes, so tests and other backends plug in there.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
)

// Key names a stored snapshot.
type Key struct {
	Run, Var string
	Step     uint64
}

// String is the object key relative to the sink's prefix:
// <run>/<var>/<step>.fz.
func (k Key) String() string {
	return k.Run + "/" + k.Var + "/" + strconv.FormatUint(k.Step, 10) + ".fz"
}

// Meta travels with a blob to the sink.
type Meta struct {
	Params    fz.Params
	Stats     fz.Stats
	Producer  string
	MsgID     string
	Timestamp time.Time
}

// Store is the sink as the pipeline needs it. Put must be create-only and
// idempotent: storing the same bytes under an existing key succeeds without
// a second copy; different bytes fail with an error wrapping ErrConflict.
// Put returns only once the object is durable. Put is called from several
// goroutines at once (Config.Writers).
type Store interface {
	Put(ctx context.Context, k Key, blob []byte, m Meta) error
}

// Locator is optionally implemented by a Store that reports where an object
// lives (e.g. with its prefix); otherwise Key.String is reported.
type Locator interface {
	Location(k Key) string
}

// Finder is optionally implemented by a Store that can look a stored
// snapshot up. A redelivered snapshot whose segment is gone (its producer
// had the result of an earlier delivery and removed it, but that result
// never reached the result stream) is then answered from the stored object
// when it was stored for the same msg_id, instead of with missing_segment.
type Finder interface {
	// Find returns the Meta of what is stored under k, or ok false.
	Find(ctx context.Context, k Key) (m Meta, ok bool, err error)
}

// ErrConflict is wrapped by Store errors for a key that holds other bytes.
var ErrConflict = errors.New("a different object is already stored under this key")

// Codec compresses raw little-endian elements; fz.Compress fits. It is
// called from several goroutines at once (Config.Compressors) and must
// produce the same bytes whatever the concurrency.
type Codec func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error)

// FZ is the default codec.
func FZ(opts ...fz.Option) Codec {
	return func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error) {
		return fz.Compress(ctx, src, p, opts...)
	}
}

// DirectCodec compresses straight from the read-only mapping of a segment,
// without the private copy the CPU path makes: the seam for device
// backends (GPU.Direct registers the mapping as pinned memory so the copy
// engine reads it in place, or stages it through a pinned ring with
// fault-guarded copies; docs/PIPELINE.md). It must return the bytes Codec
// would. It owns m: it closes it before returning, or keeps it (a cache of
// registered segments) and closes it later.
type DirectCodec func(ctx context.Context, m *ingest.Mapping, p fz.Params) ([]byte, fz.Stats, error)

// Config is what a pipeline needs.
type Config struct {
	Store Store
	Codec Codec
	// Direct, if set, is used instead of Codec and the private copy.
	Direct DirectCodec
	// Device compresses notifications naming GPU memory (device.go); nil
	// answers them device_unsupported.
	Device DeviceCodec
	// Release, if set, gets every blob back once the pipeline is done with
	// it (stored or failed), so a codec can reuse the memory.
	Release func(blob []byte)
	Log     *slog.Logger
	// Compressors is how many snapshots are mapped, copied and compressed at
	// once (default 2): while one is being copied out of shared memory
	// another is being compressed. fz already spreads one snapshot over all
	// cores, so more than 2-3 only adds memory.
	Compressors int
	// Writers is how many sink puts run at once (default 4); Queue how many
	// compressed snapshots may wait for a writer (default Writers). Together
	// they bound the memory a slow sink can pin.
	Writers int
	Queue   int
	// DrainTimeout is how long work in flight may continue after ctx ends
	// (shutdown) before what is left is handed back to JetStream for
	// redelivery (default 20s). 0 uses the default; negative hands back at
	// once.
	DrainTimeout time.Duration
	// Observer, if set, receives stage timings, queue depths and outcomes
	// (metrics).
	Observer Observer
	// OnResult, if set, observes every finished snapshot (tests).
	OnResult func(job *ingest.Job, key string, st fz.Stats, err error)
}

func (c *Config) defaults() error {
	if c.Store == nil || (c.Codec == nil && c.Direct == nil) {
		return errors.New("pipeline: Store and Codec (or Direct) are required")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Compressors <= 0 {
		c.Compressors = 2
	}
	if c.Writers <= 0 {
		c.Writers = 4
	}
	if c.Queue <= 0 {
		c.Queue = c.Writers
	}
	switch {
	case c.DrainTimeout == 0:
		c.DrainTimeout = 20 * time.Second
	case c.DrainTimeout < 0:
		c.DrainTimeout = 0
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return nil
}

// InFlight is how many jobs the receiver should hand out at once so that
// every stage can be busy: one per compressor and writer, plus the queue
// between them, plus one waiting at the dispatcher.
func (c Config) InFlight() int {
	d := c
	if d.Store == nil || d.Codec == nil { // defaults() refuses; size anyway
		d.Store, d.Codec = nopStore{}, FZ()
	}
	_ = d.defaults()
	return d.Compressors + d.Queue + d.Writers + 1
}

type nopStore struct{}

func (nopStore) Put(context.Context, Key, []byte, Meta) error { return nil }
