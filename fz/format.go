package fz

import "math"

// Format constants of the FZSC container, versions 1 and 2. docs/FORMAT.md
// is the normative description; every number here appears there.

const (
	// Magic opens every container.
	Magic = "FZSC"
	// Version1 is the container version of docs/FORMAT.md §5.1: bit planes
	// of 128-slot zero-blocks.
	Version1 = 1
	// Version2 is the container version of docs/FORMAT.md §5.2: 16-slot
	// groups with a rate each ("group rates"). Every reader reads both.
	Version2 = 2
	// DefaultVersion is the version Compress writes unless
	// WithFormatVersion says otherwise.
	DefaultVersion = Version1

	// TileElems is the number of code slots of a tile; tiles at the field's
	// edges hold fewer values and the remaining slots are zero.
	TileElems = 4096
	// Planes is the number of bit planes of a 16-bit code.
	Planes = 16
	// planeBytes is the size of one bit plane of a tile.
	planeBytes = TileElems / 8
	// BlockBytes is the zero-block size: each bit plane is cut into
	// blocks of this many bytes (128 codes) and only non-zero ones are kept.
	BlockBytes = 16
	// blocksPerPlane is planeBytes / BlockBytes.
	blocksPerPlane = planeBytes / BlockBytes

	// maxCode is the largest residual magnitude stored in a code; larger
	// residuals are escaped.
	maxCode = 1<<15 - 1
	// escapeCode (sign set, magnitude 0: "negative zero") marks a residual
	// stored in the tile's escape list.
	escapeCode = 0x8000
	// qLimit bounds |q|: values whose x/step is not below it are stored
	// losslessly, which keeps every Lorenzo sum inside int32.
	qLimit = 1 << 28

	// DefaultTilesPerChunk makes chunks of 1 Mi values (4 MiB of float32).
	DefaultTilesPerChunk = 256
	// MaxTilesPerChunk bounds a chunk's tile table for decoders.
	MaxTilesPerChunk = 1 << 16
)

// Tile word-0 flags (bits 0..15 are the plane mask).
const (
	tileHasEscapes = 1 << 16
	tileHasFill    = 1 << 17
	tileHasRaw     = 1 << 18
	tileKnownFlags = 0xFFFF | tileHasEscapes | tileHasFill | tileHasRaw
)

// Header flag bits.
const (
	flagHasFill = 1 << 0
	// flagFlatTiles: tiles are runs of TileElems consecutive values of the
	// folded field (docs/FORMAT.md §3.1), tile shape 1×1×4096, sub-block
	// 1×1×128.
	flagFlatTiles = 1 << 1
	// flagPaddedTiles: a clipped box tile is coded as a full one whose
	// cells outside the field repeat the nearest cell inside
	// (docs/FORMAT.md §3.2); box tiles only.
	flagPaddedTiles = 1 << 2
	knownFlags      = flagHasFill | flagFlatTiles | flagPaddedTiles
)

// Fixed part of the header, before the dims.
const (
	headerFixed   = 88
	indexEntry    = 24 // offset u64, size u64, crc32c u32, reserved u32
	maxHeaderSize = headerFixed + 8*MaxDims + 8 + 4
)

// notComputed marks range_min/range_max when no range was computed: the
// quiet NaN 0x7FF8000000000000 (Go's math.NaN has other payload bits).
var notComputed = math.Float64frombits(0x7FF8000000000000)
