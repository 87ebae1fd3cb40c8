// Package sinks stores compressed snapshots on local disk or S3 under one
// object layout:
//
//	<prefix>/<run>/<variable>/<step>.fz
//
// where step is zero-padded to StepDigits digits so that a plain listing
// sorts by step. A sink is opened from a URL (see Open): "file:///path" or a
// plain path for local disk, "s3://bucket/prefix" for S3.
//
// The interface is small on purpose:
//
//   - Put is create-only. Storing the same bytes again under the same key is a
//     success (a retry after a lost reply must not fail); storing different
//     bytes is an *ConflictError (errors.Is ErrConflict). A half-written blob
//     is never visible under its final name.
//   - Get returns the whole blob after checking its CRC32C against the one
//     recorded at Put time; a mismatch is a *ChecksumError naming the object.
//   - ReadRange returns a byte range without fetching the whole object. It
//     cannot check the whole-blob checksum, so callers check the range (the
//     fz chunk index carries a CRC32C per chunk).
//   - Stat and List read the catalog: it is derived from the objects
//     themselves (object metadata on S3, a sidecar JSON per blob on disk), so
//     it can never disagree with what is stored, whatever point a writer
//     crashed at. docs/SINKS.md explains why.
//
// Blobs are opaque bytes here: this package does not parse the fz container.
// Callers fill Meta (codec parameters, sizes) from the container header.
//
// Missing run, variable or step: a *NotFoundError (errors.Is ErrNotFound) that
// lists what does exist at that level.
package sinks

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// Key names one stored snapshot of one variable.
type Key struct {
	Run  string
	Var  string
	Step uint64
}

func (k Key) String() string { return fmt.Sprintf("%s/%s/%s", k.Run, k.Var, stepName(k.Step)) }

// Meta describes a stored blob. The codec fields are the caller's (copied
// from the container header); StoredBytes, CRC32C and Created are set by the
// sink on Put.
type Meta struct {
	DType     string    `json:"dtype,omitempty"`       // "f32" or "f64"
	Dims      []uint64  `json:"dims,omitempty"`        // slowest → fastest
	Mode      string    `json:"mode,omitempty"`        // "abs" or "rel"
	Bound     float64   `json:"bound,omitempty"`       // error bound as given
	AbsEB     float64   `json:"abs_eb,omitempty"`      // absolute bound used
	MaxAbsErr float64   `json:"max_abs_err,omitempty"` // measured at compression, 0 if unknown
	RawBytes  uint64    `json:"raw_bytes,omitempty"`   // decompressed size
	Stored    uint64    `json:"stored_bytes"`          // blob size
	CRC32C    uint32    `json:"crc32c"`                // of the whole blob (Castagnoli)
	Created   time.Time `json:"created,omitzero"`      // when Put stored it
	Extra     string    `json:"extra,omitempty"`       // free-form caller note, ≤ 256 bytes
}

// Ratio is RawBytes / Stored, or 0 when either is unknown.
func (m Meta) Ratio() float64 {
	if m.Stored == 0 || m.RawBytes == 0 {
		return 0
	}
	return float64(m.RawBytes) / float64(m.Stored)
}

// Entry is one catalog row.
type Entry struct {
	Key  Key
	Meta Meta
}

// Filter narrows List. Empty fields match everything; Var without Run is an
// error.
type Filter struct {
	Run string
	Var string
}

// Sink stores and retrieves blobs. Implementations are safe for concurrent
// use.
type Sink interface {
	// Put stores blob under k, create-only (see the package doc). m.Stored
	// and m.CRC32C are computed here; if the caller set m.CRC32C it must
	// match the blob, which catches corruption between compressor and sink.
	Put(ctx context.Context, k Key, blob []byte, m Meta) error
	// Get fetches the whole blob and verifies its CRC32C.
	Get(ctx context.Context, k Key) ([]byte, Meta, error)
	// Stat returns the catalog entry for k without fetching the blob.
	Stat(ctx context.Context, k Key) (Meta, error)
	// ReadRange returns n bytes at offset off of the blob under k.
	ReadRange(ctx context.Context, k Key, off, n int64) ([]byte, error)
	// List returns the catalog rows matching f, sorted by run, var, step.
	List(ctx context.Context, f Filter) ([]Entry, error)
	// String is the sink's URL, without credentials.
	String() string
	Close() error
}

var (
	// ErrNotFound: the run, variable or step does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a different blob is already stored under the key.
	ErrConflict = errors.New("a different blob is already stored under this key")
	// ErrChecksum: stored bytes do not match their recorded CRC32C.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrBadURL: Open was given a sink URL it cannot parse (unknown scheme,
	// no bucket, ...): the caller's mistake, not a storage failure.
	ErrBadURL = errors.New("bad sink URL")
)

// badURLError is an Open error about the URL itself: its message says what
// is wrong and what is expected; errors.Is matches ErrBadURL.
type badURLError struct{ err error }

func (e *badURLError) Error() string        { return e.err.Error() }
func (e *badURLError) Unwrap() error        { return e.err }
func (e *badURLError) Is(target error) bool { return target == ErrBadURL }

func badURL(format string, a ...any) error { return &badURLError{fmt.Errorf(format, a...)} }

// NotFoundError says which level is missing and what exists there.
type NotFoundError struct {
	Sink  string
	Level string   // "run", "variable" or "step"
	Name  string   // what was asked for
	Under string   // the parent ("" for runs, "run" or "run/var")
	Have  []string // what exists at that level, sorted
}

func (e *NotFoundError) Error() string {
	where := e.Sink
	if e.Under != "" {
		where = e.Under + " in " + e.Sink
	}
	have := "none"
	if len(e.Have) > 0 {
		// A run may have thousands of steps; the newest are the useful ones.
		const max = 20
		h, more := e.Have, ""
		if len(h) > max {
			h = h[len(h)-max:]
			more = fmt.Sprintf(" (last %d of %d shown)", max, len(e.Have))
		}
		have = strings.Join(h, ", ") + more
	}
	plural := map[string]string{"run": "runs", "variable": "variables", "step": "steps"}[e.Level]
	return fmt.Sprintf("%s %q not found in %s; existing %s: %s", e.Level, e.Name, where, plural, have)
}

func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// ConflictError: Put found a different blob already stored under Key.
type ConflictError struct {
	Object     string
	HaveCRC32C uint32
	HaveSize   uint64
	PutCRC32C  uint32
	PutSize    uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s already holds a different blob (%d bytes, crc32c %08x; refusing to replace it with %d bytes, crc32c %08x): puts are create-only",
		e.Object, e.HaveSize, e.HaveCRC32C, e.PutSize, e.PutCRC32C)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// ChecksumError: the bytes read do not match the recorded CRC32C.
type ChecksumError struct {
	Object    string
	Want, Got uint32
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s is corrupt: crc32c is %08x, catalog says %08x", e.Object, e.Got, e.Want)
}

func (e *ChecksumError) Unwrap() error { return ErrChecksum }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C is the checksum sinks record for a blob.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// DefaultMaxObjectBytes bounds what Get allocates for one object: sizes come
// from untrusted listings and headers. 64 GiB is far above one variable of
// one step in practice; WithMaxObjectBytes raises it.
const DefaultMaxObjectBytes = int64(64) << 30

type options struct {
	log       *slog.Logger
	maxObject int64
	s3        S3Config
}

// Option configures Open.
type Option func(*options)

// WithLogger sets the logger (default slog.Default()). Credentials are never
// logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithMaxObjectBytes sets the largest object Get will allocate for.
func WithMaxObjectBytes(n int64) Option { return func(o *options) { o.maxObject = n } }

// WithS3 overrides the S3 settings that otherwise come from the environment
// (see S3Config). Zero fields keep their environment or default values.
func WithS3(c S3Config) Option { return func(o *options) { o.s3 = c } }

// Open opens the sink addressed by rawURL: "file:///abs/path", a plain path
// (relative paths are made absolute), or "s3://bucket[/prefix]".
func Open(ctx context.Context, rawURL string, opts ...Option) (Sink, error) {
	o := options{log: slog.Default(), maxObject: DefaultMaxObjectBytes}
	for _, f := range opts {
		f(&o)
	}
	if o.maxObject <= 0 {
		return nil, fmt.Errorf("max object size %d: expected > 0", o.maxObject)
	}
	if strings.TrimSpace(rawURL) == "" {
		return nil, badURL("empty sink URL: expected file:///path, a path, or s3://bucket/prefix")
	}
	scheme, rest, hasScheme := strings.Cut(rawURL, "://")
	if !hasScheme {
		return openLocal(rawURL, o)
	}
	switch strings.ToLower(scheme) {
	case "file":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, badURL("sink URL %q: %w", rawURL, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, badURL("sink URL %q names host %q: file URLs must be local, e.g. file:///scratch/run1", rawURL, u.Host)
		}
		if u.Path == "" {
			return nil, badURL("sink URL %q has no path: expected file:///abs/path", rawURL)
		}
		return openLocal(filepath.FromSlash(u.Path), o)
	case "s3":
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, badURL("sink URL %q has no bucket: expected s3://bucket or s3://bucket/prefix", rawURL)
		}
		if p := strings.Trim(prefix, "/"); p != "" {
			for _, seg := range strings.Split(p, "/") {
				if err := ValidateName("prefix segment", seg); err != nil {
					return nil, badURL("sink URL %q: %w: expected s3://bucket/prefix, each prefix segment 1-%d characters of A-Z a-z 0-9 . _ - starting with a letter or digit",
						rawURL, err, MaxNameLen)
				}
			}
		}
		return openS3(ctx, bucket, prefix, o)
	}
	return nil, badURL("sink URL %q: unknown scheme %q: expected file:///path, a path, or s3://bucket/prefix", rawURL, scheme)
}
