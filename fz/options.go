package fz

import "runtime"

// Option configures Compress and Decompress.
type Option func(*options)

type options struct {
	workers       int
	tilesPerChunk uint64
	progress      func(done, total uint64)
	maxRaw        uint64
	version       uint16  // container version to write; 0: DefaultVersion
	backend       Backend // nil: this package's CPU code
}

func buildOptions(opts []Option) options {
	o := options{workers: runtime.GOMAXPROCS(0), tilesPerChunk: DefaultTilesPerChunk}
	for _, f := range opts {
		f(&o)
	}
	if o.workers < 1 {
		o.workers = runtime.GOMAXPROCS(0)
	}
	return o
}

// WithWorkers sets the number of parallel chunk workers (default
// GOMAXPROCS; n < 1 means the default). The output does not depend on it.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithTilesPerChunk sets the chunk size in tiles of 4096 values (default
// 256). Smaller chunks allow finer random access; the bytes change.
func WithTilesPerChunk(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.tilesPerChunk = uint64(n)
		}
	}
}

// WithProgress calls f after each chunk with the raw bytes done so far and
// the total. f is called from one goroutine at a time.
func WithProgress(f func(done, total uint64)) Option {
	return func(o *options) { o.progress = f }
}

// WithMaxRawSize makes Decompress refuse containers that would decode to
// more than n bytes, before allocating anything: a guard for untrusted
// input (a valid container can expand about 2731 times).
func WithMaxRawSize(n uint64) Option { return func(o *options) { o.maxRaw = n } }

// WithFormatVersion sets the container version Compress writes: 1 or 2
// (docs/FORMAT.md; 0 means DefaultVersion). Decompress reads every version
// and ignores this option. Compress rejects any other value.
func WithFormatVersion(v int) Option {
	return func(o *options) {
		if v < 0 || v > 0xFFFF {
			v = 0xFFFF // rejected by Compress with the value's range in the message
		}
		o.version = uint16(v)
	}
}
