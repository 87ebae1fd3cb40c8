package fz

// Format constants of the FZSC container, version 1. docs/FORMAT.md is the
// normative description; every number here appears there.

const (
	// Magic opens every container.
	Magic = "FZSC"
	// Version is the only container version this package writes and reads.
	Version = 1

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
	knownFlags  = flagHasFill
)

// Fixed part of the header, before the dims.
const (
	headerFixed   = 88
	indexEntry    = 24 // offset u64, size u64, crc32c u32, reserved u32
	maxHeaderSize = headerFixed + 8*MaxDims + 8 + 4
)
