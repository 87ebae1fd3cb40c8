package fz

import (
	"context"
	"fmt"
	"math"
	"unsafe"
)

// Backend is a codec implementation: the CPU one in this package or the
// GPU one in package cuda. Every backend writes and reads the same bytes.
type Backend interface {
	// Name says which backend (and device) this is, for logs and messages.
	Name() string
	// Compress is Compress with this backend.
	Compress(ctx context.Context, src []byte, p Params, opts ...Option) ([]byte, Stats, error)
	// DecompressTo is DecompressTo with this backend.
	DecompressTo(ctx context.Context, blob, dst []byte, opts ...Option) (*Header, error)
}

// WithBackend makes Compress, Decompress and DecompressTo run on b (nil:
// the CPU code of this package).
func WithBackend(b Backend) Option { return func(o *options) { o.backend = b } }

type cpuBackend struct{}

// CPU returns the CPU backend.
func CPU() Backend { return cpuBackend{} }

func (cpuBackend) Name() string { return "cpu" }

func (cpuBackend) Compress(ctx context.Context, src []byte, p Params, opts ...Option) ([]byte, Stats, error) {
	return Compress(ctx, src, p, append(opts, WithBackend(nil))...)
}

func (cpuBackend) DecompressTo(ctx context.Context, blob, dst []byte, opts ...Option) (*Header, error) {
	return DecompressTo(ctx, blob, dst, append(opts, WithBackend(nil))...)
}

// Settings are the resolved options, for backends outside this package.
type Settings struct {
	Workers       int
	TilesPerChunk uint64
	Progress      func(done, total uint64)
	// FormatVersion is the container version to write (0: DefaultVersion),
	// as WithFormatVersion gave it; 0xFFFF for a value outside 0 … 0xFFFE.
	// FormatVersionOf checks it.
	FormatVersion uint16
	// Tiling is the tile geometry to write, as WithTiling gave it;
	// PlanGeometryFor resolves it (TilingAuto to what it takes for the
	// field) and rejects values other than the four constants.
	Tiling Tiling
}

// SettingsOf resolves opts.
func SettingsOf(opts ...Option) Settings {
	o := buildOptions(opts)
	v := uint16(0xFFFF)
	if o.version >= 0 && o.version < 0xFFFF {
		v = uint16(o.version)
	}
	return Settings{Workers: o.workers, TilesPerChunk: o.tilesPerChunk, Progress: o.progress, FormatVersion: v, Tiling: o.tiling}
}

// Geometry is a field's tiling as docs/FORMAT.md section 3 defines it.
type Geometry struct {
	Elements      uint64
	NZ, NY, NX    uint64 // folded shape
	Tile, Block   [3]int // z, y, x
	Tiles         uint64
	TilesPerChunk uint64
	Chunks        uint64
	// Flat: flat tiles (header flags bit 1, docs/FORMAT.md §3.1). Tile t
	// is then the flat indices [4096t, min(4096t+4096, Elements)), Tile is
	// 1×1×4096, Block 1×1×128, and Lorenzo keeps the 3-D neighbours of the
	// folded shape NZ×NY×NX inside the run.
	Flat bool
	// Padded: box tiles whose clipped tiles are coded as full ones (header
	// flags bit 2, docs/FORMAT.md §3.2).
	Padded bool
}

func geometryOf(l *layout) Geometry {
	return Geometry{Elements: l.n, NZ: l.nz, NY: l.ny, NX: l.nx,
		Tile: [3]int{l.tz, l.ty, l.tx}, Block: [3]int{l.bz, l.by, l.bx},
		Tiles: l.tiles, TilesPerChunk: l.perChunk, Chunks: l.chunks, Flat: l.flat, Padded: l.padded}
}

// Tiling is the tiling g has: TilingFlat, TilingPadded or TilingBoxes
// (never TilingAuto, which PlanGeometryFor resolves to one of them).
func (g Geometry) Tiling() Tiling {
	switch {
	case g.Flat:
		return TilingFlat
	case g.Padded:
		return TilingPadded
	}
	return TilingBoxes
}

// PlanGeometry is the geometry the encoder uses for a field of these dims
// with box tiles (TilingBoxes, the default), which are the same for every
// dtype.
func PlanGeometry(dims []uint64, tilesPerChunk uint64) (Geometry, error) {
	return PlanGeometryFor(Float32, dims, tilesPerChunk, TilingBoxes)
}

// PlanGeometryFor is the geometry the encoder uses for a field of dtype dt
// and these dims under tiling t (TilingAuto resolved from dt and dims as
// docs/FORMAT.md §3.1 says), so that every backend makes the same choice.
func PlanGeometryFor(dt DType, dims []uint64, tilesPerChunk uint64, t Tiling) (Geometry, error) {
	l, err := planLayout(dt, dims, tilesPerChunk, t)
	if err != nil {
		return Geometry{}, err
	}
	return geometryOf(l), nil
}

// planLayout is the layout Compress writes for a field of dtype dt and
// these dims under tiling t.
func planLayout(dt DType, dims []uint64, tilesPerChunk uint64, t Tiling) (*layout, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if dt.Size() == 0 {
		return nil, fmt.Errorf("invalid dtype %v: expected f32 or f64", dt)
	}
	rank := 1
	if n, err := NumElements(dims); err != nil {
		return nil, err
	} else if n > 0 {
		_, _, _, rank = foldDims(dims)
	}
	if t == TilingAuto { // docs/FORMAT.md §3.1: flat, else padded, else boxes
		switch {
		case flatWanted(dims):
			t = TilingFlat
		case paddedWanted(dt, dims):
			t = TilingPadded
		default:
			t = TilingBoxes
		}
	}
	if t == TilingFlat {
		return newFlatLayout(dims, tilesPerChunk)
	}
	l, err := newLayout(dims, defaultShape(rank), tilesPerChunk)
	if err == nil {
		l.padded = t == TilingPadded
	}
	return l, err
}

// Geometry is the geometry a header describes.
func (h *Header) Geometry() (Geometry, error) {
	l, err := h.layout()
	if err != nil {
		return Geometry{}, formatErr("%v", err)
	}
	return geometryOf(l), nil
}

// ChunkTiles returns the tile range [first, end) of chunk c.
func (g Geometry) ChunkTiles(c uint64) (first, end uint64) {
	first = c * g.TilesPerChunk
	return first, min(first+g.TilesPerChunk, g.Tiles)
}

// FillBits is the header's fill_bits for p (NaN fills get the canonical
// quiet NaN), and whether p has a fill value.
func FillBits(p Params) (uint64, bool) {
	if p.Fill == nil {
		return 0, false
	}
	f := *p.Fill
	if p.DType == Float32 {
		if math.IsNaN(f) {
			return 0x7FC00000, true
		}
		return uint64(math.Float32bits(float32(f))), true
	}
	if math.IsNaN(f) {
		return 0x7FF8000000000000, true
	}
	return math.Float64bits(f), true
}

// NewHeader is the header Compress writes for p with the given derived
// bound, step and range (haveRange false: the range fields are NaN).
// Chunks are left for the caller to fill in. Its Version is DefaultVersion:
// a backend writing another version sets h.Version.
func NewHeader(p Params, g Geometry, absEB, step, lo, hi float64, haveRange bool) *Header {
	h := &Header{
		Version: DefaultVersion, DType: p.DType, Mode: p.Mode, Dims: append([]uint64(nil), p.Dims...),
		Bound: p.Bound, AbsEB: absEB, Step: step, Tile: g.Tile, Block: g.Block,
		TilesPerChunk: uint32(g.TilesPerChunk), RangeMin: notComputed, RangeMax: notComputed,
		Flat: g.Flat, Padded: g.Padded, Chunks: make([]Chunk, g.Chunks),
	}
	if haveRange {
		h.RangeMin, h.RangeMax = lo, hi
	}
	if bits, ok := FillBits(p); ok {
		f := *p.Fill
		h.Fill, h.FillBits = &f, bits
	}
	h.HeaderSize = uint64(fixedSize(len(h.Dims))) + g.Chunks*indexEntry + 4
	return h
}

// IndexOffset is where the chunk index starts (the header's size proper).
func (h *Header) IndexOffset() uint64 { return uint64(fixedSize(len(h.Dims))) }

// PutHeader writes the header and chunk index (h.Chunks complete) into
// dst[:h.HeaderSize].
func (h *Header) PutHeader(dst []byte) {
	h.appendHeader(dst[:0:h.HeaderSize])
}

// CRC32C is the checksum the container uses.
func CRC32C(b []byte) uint32 { return crc32c(b) }

// FormatError wraps ErrFormat with a message, for backends' decoders.
func FormatError(format string, a ...any) error { return formatErr(format, a...) }

// ViewFloats views little-endian bytes as values (no copy).
func ViewFloats[T float32 | float64](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}
