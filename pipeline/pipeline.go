// Package pipeline turns ingested snapshots into stored, compressed objects.
//
// This is the minimal sequential CPU path: validate → map segment → compress
// → sink put → reply/ack, one snapshot at a time. Its contract with the
// rest of the sidecar is Run(ctx, jobs, Config); the streaming pipeline can
// replace the insides (concurrency, GPU, chunking) without touching ingest
// or the command wiring.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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
// Put returns only once the object is durable.
type Store interface {
	Put(ctx context.Context, k Key, blob []byte, m Meta) error
}

// Locator is optionally implemented by a Store that reports where an object
// lives (e.g. with its prefix); otherwise Key.String is reported.
type Locator interface {
	Location(k Key) string
}

// ErrConflict is wrapped by Store errors for a key that holds other bytes.
var ErrConflict = errors.New("a different object is already stored under this key")

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent marks a Store error that retrying will not fix (bad key,
// permission denied). Unmarked errors are treated as transient and the
// snapshot is redelivered later.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

func isPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Codec compresses raw little-endian elements; fz.Compress fits.
type Codec func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error)

// FZ is the default codec.
func FZ(opts ...fz.Option) Codec {
	return func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error) {
		return fz.Compress(ctx, src, p, opts...)
	}
}

// Config is what a pipeline needs.
type Config struct {
	Store Store
	Codec Codec
	Log   *slog.Logger
	// OnResult, if set, observes every finished snapshot (metrics, tests).
	OnResult func(job *ingest.Job, key string, st fz.Stats, err error)
}

// Run processes jobs until the channel closes. On ctx cancellation the job
// at hand is handed back for redelivery and the rest are drained the same
// way, so nothing in flight is lost at shutdown.
func Run(ctx context.Context, jobs <-chan *ingest.Job, cfg Config) error {
	if cfg.Store == nil || cfg.Codec == nil {
		return errors.New("pipeline: Store and Codec are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &sequential{cfg: cfg}
	for job := range jobs {
		if ctx.Err() != nil {
			job.Retry(fmt.Errorf("shutting down: %w", context.Cause(ctx)))
			continue
		}
		s.process(ctx, job)
	}
	return nil
}

type sequential struct {
	cfg Config
	// buf is reused across snapshots; its size is bounded by the largest
	// admitted snapshot, i.e. by the budget.
	buf []byte
}

func (s *sequential) process(ctx context.Context, job *ingest.Job) {
	start := time.Now()
	n := job.Notice
	key := Key{Run: n.Run, Var: n.Var, Step: n.Step}
	loc := key.String()
	if l, ok := s.cfg.Store.(Locator); ok {
		loc = l.Location(key)
	}
	var st fz.Stats
	err := s.run(ctx, job, key, loc, &st)
	switch {
	case err == nil:
		err = job.Complete(ctx, ingest.Outcome{Key: loc, Stats: st})
		s.cfg.Log.Info("snapshot stored", "run", n.Run, "var", n.Var, "step", n.Step, "key", loc,
			"raw", st.RawBytes, "compressed", st.CompressedBytes, "ratio", st.Ratio(), "max_err", st.MaxAbsErr,
			"seconds", time.Since(start).Seconds())
	case ctx.Err() != nil || errors.Is(err, errTransient):
		job.Retry(err)
	default:
		job.Fail(ctx, err)
	}
	if s.cfg.OnResult != nil {
		s.cfg.OnResult(job, loc, st, err)
	}
}

var errTransient = errors.New("transient")

type transientErr struct{ err error }

func (t transientErr) Error() string        { return t.err.Error() }
func (t transientErr) Unwrap() []error      { return []error{t.err, errTransient} }
func (t transientErr) Is(target error) bool { return target == errTransient }

func (s *sequential) run(ctx context.Context, job *ingest.Job, key Key, loc string, st *fz.Stats) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Log.Error("panic while processing snapshot", "msg_id", job.Notice.MsgID, "panic", r, "stack", string(debug.Stack()))
			err = &ingest.Error{Code: ingest.CodeInternal, Message: fmt.Sprintf("sidecar failure while processing: %v", r)}
		}
	}()
	m, err := job.Map()
	if err != nil {
		return err
	}
	// Compress from a private copy: the producer cannot then crash us by
	// truncating the file mid-read, nor tear the snapshot by writing to it.
	size := int(m.Len())
	if cap(s.buf) < size {
		s.buf = nil // let the old one go before allocating the new one
		s.buf = make([]byte, size)
	}
	src := s.buf[:size]
	err = m.CopyTo(src)
	m.Close()
	if err != nil {
		return err
	}
	blob, stats, err := s.cfg.Codec(ctx, src, job.Params)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ingest.Error{Code: ingest.CodeCompress, Message: err.Error()}
	}
	*st = stats
	meta := Meta{Params: job.Params, Stats: stats, Producer: job.Notice.Producer, MsgID: job.Notice.MsgID, Timestamp: time.Now()}
	if err := s.cfg.Store.Put(ctx, key, blob, meta); err != nil {
		var ie *ingest.Error
		switch {
		case errors.As(err, &ie):
			return err
		case errors.Is(err, ErrConflict):
			return &ingest.Error{Code: ingest.CodeConflict, Message: fmt.Sprintf("%s: %v", loc, err)}
		case isPermanent(err):
			return &ingest.Error{Code: ingest.CodeStore, Message: fmt.Sprintf("%s: %v", loc, err)}
		}
		return transientErr{fmt.Errorf("store %s: %w", loc, err)}
	}
	return nil
}
