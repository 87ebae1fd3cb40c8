package fz

import (
	"fmt"
	"runtime"
	"strings"
)

// Option configures Compress and Decompress.
type Option func(*options)

type options struct {
	workers       int
	tilesPerChunk uint64
	progress      func(done, total uint64)
	maxRaw        uint64
	version       int     // container version to write as given; 0: DefaultVersion
	tiling        Tiling  // tile geometry to write as given (checked by Compress)
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
	return func(o *options) { o.version = v }
}

// FormatVersionOf is the container version opts ask Compress to write
// (DefaultVersion when none is given), or an error naming a version this
// package cannot write. Backends outside this package call it.
func FormatVersionOf(opts ...Option) (uint16, error) {
	return buildOptions(opts).formatVersion()
}

func (o options) formatVersion() (uint16, error) {
	switch o.version {
	case 0:
		return DefaultVersion, nil
	case Version1, Version2:
		return uint16(o.version), nil
	}
	return 0, fmt.Errorf("fz: format version %d is not supported: expected 1, 2 or 0 (the default, %d)", o.version, DefaultVersion)
}

// Tiling is the tile geometry Compress writes (docs/FORMAT.md §3, §3.1).
// Decompress reads every geometry and ignores it.
type Tiling int

const (
	// TilingBoxes cuts the folded field into boxes (8×16×32 in rank 3):
	// the default.
	TilingBoxes Tiling = iota
	// TilingFlat makes every tile a run of 4096 consecutive values of the
	// folded field (header flags bit 1), whatever the shape.
	TilingFlat
	// TilingAuto chooses from the field's dtype and dims alone
	// (docs/FORMAT.md §3.1): flat tiles for a folded rank-3 field with
	// ny·nx ≤ 2048 whose box tiles would leave at least a quarter of the
	// values in clipped tiles; else padded box tiles (as TilingPadded) for
	// a float32 field of folded rank 3 with at least one clipped tile whose
	// sub-block growth Π ceil(n_i/b_i)·b_i / Π n_i (b = 4×4×8) is at most
	// 1.05 (a GPU codec walks every tile whole; on the measured fields
	// padding then costs at most 1 % of ratio, and the CPU codec about a
	// fifth of its compress speed); else boxes.
	TilingAuto
	// TilingPadded cuts the field into boxes as TilingBoxes does, and codes
	// each clipped tile (at the field's far edges) as a full one whose
	// cells outside the field repeat the nearest cell inside (header flags
	// bit 2): one walk for every tile in a GPU codec, for a ratio that is
	// the same where the field's extents leave whole sub-blocks at its
	// edges and up to ~14 % lower where they leave thin ones (docs/FORMAT.md
	// §3.2). Files with it need a reader of this version.
	TilingPadded
)

// Tilings lists the names ParseTiling accepts, for messages.
const Tilings = "boxes (the default), flat, auto or padded"

// String is the name ParseTiling accepts.
func (t Tiling) String() string {
	switch t {
	case TilingBoxes:
		return "boxes"
	case TilingFlat:
		return "flat"
	case TilingAuto:
		return "auto"
	case TilingPadded:
		return "padded"
	}
	return fmt.Sprintf("Tiling(%d)", int(t))
}

// ParseTiling parses "boxes", "flat", "auto" or "padded" (case-insensitive).
func ParseTiling(s string) (Tiling, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "boxes":
		return TilingBoxes, nil
	case "flat":
		return TilingFlat, nil
	case "auto":
		return TilingAuto, nil
	case "padded":
		return TilingPadded, nil
	}
	return 0, fmt.Errorf("fz: tiling %q: expected %s", s, Tilings)
}

func (t Tiling) check() error {
	switch t {
	case TilingBoxes, TilingFlat, TilingAuto, TilingPadded:
		return nil
	}
	return fmt.Errorf("fz: tiling %d is not supported: expected %d (boxes), %d (flat), %d (auto) or %d (padded)", int(t), TilingBoxes, TilingFlat, TilingAuto, TilingPadded)
}

// WithTiling sets the tile geometry Compress writes (default TilingBoxes).
// Compress rejects values other than the four constants.
func WithTiling(t Tiling) Option { return func(o *options) { o.tiling = t } }
