package fz

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ErrFormat is wrapped by every error about malformed or corrupted input.
var ErrFormat = errors.New("fz: invalid container")

func formatErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, a...))
}

// Chunk is one entry of the chunk index.
type Chunk struct {
	Offset uint64 // from the start of the container
	Size   uint64
	CRC    uint32 // CRC32C of the chunk's bytes
}

// Header is the parsed container header and chunk index.
type Header struct {
	Version       uint16
	DType         DType
	Mode          Mode
	Dims          []uint64
	Bound         float64  // as given (absolute or relative)
	AbsEB         float64  // absolute bound every finite value meets
	Step          float64  // quantization step: x' = q·Step
	Fill          *float64 // nil when the field has no fill value
	FillBits      uint64
	RangeMin      float64 // over finite non-fill values; NaN when not computed
	RangeMax      float64
	Tile          [3]int // tile extents z, y, x
	Block         [3]int // sub-block extents z, y, x (128 values)
	TilesPerChunk uint32
	// Flat is flags bit 1: tiles are runs of 4096 consecutive values
	// (docs/FORMAT.md §3.1); Tile is then 1×1×4096 and Block 1×1×128.
	Flat bool
	// Padded is flags bit 2: a clipped box tile is coded as a full one
	// whose cells outside the field repeat the nearest cell inside
	// (docs/FORMAT.md §3.2); never with Flat.
	Padded bool
	Chunks []Chunk
	// HeaderSize is the byte count of header plus chunk index; chunk
	// payloads start there.
	HeaderSize uint64
}

// Elements is the number of values in the field.
func (h *Header) Elements() uint64 {
	n, _ := NumElements(h.Dims)
	return n
}

// RawSize is the decompressed size in bytes.
func (h *Header) RawSize() uint64 { return h.Elements() * uint64(h.DType.Size()) }

// CompressedSize is the container size implied by the index.
func (h *Header) CompressedSize() uint64 {
	if len(h.Chunks) == 0 {
		return h.HeaderSize
	}
	c := h.Chunks[len(h.Chunks)-1]
	return c.Offset + c.Size
}

func (h *Header) layout() (*layout, error) {
	l, err := newLayoutOf(h.Dims, shape{h.Tile, h.Block}, uint64(h.TilesPerChunk), h.Flat)
	if err == nil {
		l.padded = h.Padded
	}
	return l, err
}

func fixedSize(ndim int) int { return headerFixed + 8*ndim + 4 }

// appendHeader writes the header and a chunk index (entries may be patched
// later with putIndex).
func (h *Header) appendHeader(dst []byte) []byte {
	start := len(dst)
	var b [headerFixed]byte
	copy(b[0:4], Magic)
	le := binary.LittleEndian
	le.PutUint16(b[4:], h.Version)
	le.PutUint16(b[6:], uint16(fixedSize(len(h.Dims))))
	b[8] = byte(h.DType)
	b[9] = byte(h.Mode)
	b[10] = byte(len(h.Dims))
	if h.Fill != nil {
		b[11] |= flagHasFill
	}
	if h.Flat {
		b[11] |= flagFlatTiles
	}
	if h.Padded {
		b[11] |= flagPaddedTiles
	}
	le.PutUint16(b[12:], uint16(h.Tile[0]))
	le.PutUint16(b[14:], uint16(h.Tile[1]))
	le.PutUint16(b[16:], uint16(h.Tile[2]))
	le.PutUint16(b[18:], uint16(h.Block[0]))
	le.PutUint16(b[20:], uint16(h.Block[1]))
	le.PutUint16(b[22:], uint16(h.Block[2]))
	le.PutUint32(b[24:], h.TilesPerChunk)
	le.PutUint64(b[32:], math.Float64bits(h.Bound))
	le.PutUint64(b[40:], math.Float64bits(h.AbsEB))
	le.PutUint64(b[48:], math.Float64bits(h.Step))
	le.PutUint64(b[56:], h.FillBits)
	le.PutUint64(b[64:], math.Float64bits(h.RangeMin))
	le.PutUint64(b[72:], math.Float64bits(h.RangeMax))
	le.PutUint64(b[80:], uint64(len(h.Chunks)))
	dst = append(dst, b[:]...)
	for _, d := range h.Dims {
		dst = le.AppendUint64(dst, d)
	}
	dst = le.AppendUint32(dst, crc32c(dst[start:]))
	for _, c := range h.Chunks {
		dst = le.AppendUint64(dst, c.Offset)
		dst = le.AppendUint64(dst, c.Size)
		dst = le.AppendUint32(dst, c.CRC)
		dst = le.AppendUint32(dst, 0)
	}
	idx := start + fixedSize(len(h.Dims))
	return le.AppendUint32(dst, crc32c(dst[idx:]))
}

// PeekHeaderSize returns how many leading bytes of a container ReadHeader
// needs, given at least its first 80 bytes: useful for ranged reads.
func PeekHeaderSize(prefix []byte) (uint64, error) {
	if len(prefix) < headerFixed {
		return 0, formatErr("need the first %d bytes, have %d", headerFixed, len(prefix))
	}
	if string(prefix[:4]) != Magic {
		return 0, formatErr("bad magic %q: not an fzsidecar container (expected %q)", prefix[:4], Magic)
	}
	if v := binary.LittleEndian.Uint16(prefix[4:]); v != Version1 && v != Version2 {
		return 0, formatErr("unsupported format version %d (this build reads versions %d and %d)", v, Version1, Version2)
	}
	nd := int(prefix[10])
	nc := binary.LittleEndian.Uint64(prefix[80:])
	if nc > math.MaxUint64/indexEntry/2 {
		return 0, formatErr("chunk count %d is impossible", nc)
	}
	return uint64(fixedSize(nd)) + nc*indexEntry + 4, nil
}

// ReadHeader parses and checks the header and chunk index at the start of b.
// b may be just a prefix of the container (see PeekHeaderSize).
func ReadHeader(b []byte) (*Header, error) {
	need, err := PeekHeaderSize(b)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	h := &Header{Version: le.Uint16(b[4:])}
	nd := int(b[10])
	if nd < 1 || nd > MaxDims {
		return nil, formatErr("header field ndim = %d, expected 1..%d", nd, MaxDims)
	}
	hs := fixedSize(nd)
	if got := int(le.Uint16(b[6:])); got != hs {
		return nil, formatErr("header field header_size = %d, expected %d for %d dims", got, hs, nd)
	}
	if len(b) < hs {
		return nil, formatErr("truncated header: %d bytes, need %d", len(b), hs)
	}
	if want, got := crc32c(b[:hs-4]), le.Uint32(b[hs-4:]); want != got {
		return nil, formatErr("header checksum mismatch (stored %08x, computed %08x): header corrupted", got, want)
	}
	h.DType = DType(b[8])
	if h.DType.Size() == 0 {
		return nil, formatErr("header field dtype = %d, expected 1 (f32) or 2 (f64)", b[8])
	}
	h.Mode = Mode(b[9])
	if h.Mode != Abs && h.Mode != Rel {
		return nil, formatErr("header field mode = %d, expected 1 (abs) or 2 (rel)", b[9])
	}
	flags := b[11]
	if flags&^knownFlags != 0 {
		return nil, formatErr("header field flags = %#x has unknown bits", flags)
	}
	h.Tile = [3]int{int(le.Uint16(b[12:])), int(le.Uint16(b[14:])), int(le.Uint16(b[16:]))}
	h.Block = [3]int{int(le.Uint16(b[18:])), int(le.Uint16(b[20:])), int(le.Uint16(b[22:]))}
	h.TilesPerChunk = le.Uint32(b[24:])
	if flags&flagFlatTiles != 0 {
		h.Flat = true
		if h.Tile != flatShape.tile || h.Block != flatShape.block {
			return nil, formatErr("header flags bit 1 (flat tiles) needs tile shape 1x1x%d and sub-block 1x1x%d, the header has %dx%dx%d and %dx%dx%d",
				TileElems, 8*BlockBytes, h.Tile[0], h.Tile[1], h.Tile[2], h.Block[0], h.Block[1], h.Block[2])
		}
	}
	if flags&flagPaddedTiles != 0 {
		if h.Flat {
			return nil, formatErr("header flags bits 1 (flat tiles) and 2 (padded box tiles) are both set; a file has one or neither")
		}
		h.Padded = true
	}
	if le.Uint32(b[28:]) != 0 {
		return nil, formatErr("header reserved field at byte 28 is not zero")
	}
	h.Bound = math.Float64frombits(le.Uint64(b[32:]))
	h.AbsEB = math.Float64frombits(le.Uint64(b[40:]))
	h.Step = math.Float64frombits(le.Uint64(b[48:]))
	h.FillBits = le.Uint64(b[56:])
	h.RangeMin = math.Float64frombits(le.Uint64(b[64:]))
	h.RangeMax = math.Float64frombits(le.Uint64(b[72:]))
	nc := le.Uint64(b[80:])
	if flags&flagHasFill != 0 {
		var f float64
		if h.DType == Float32 {
			if h.FillBits>>32 != 0 {
				return nil, formatErr("header field fill has bits beyond float32")
			}
			f = float64(math.Float32frombits(uint32(h.FillBits)))
		} else {
			f = math.Float64frombits(h.FillBits)
		}
		h.Fill = &f
	} else if h.FillBits != 0 {
		return nil, formatErr("header field fill is set but the has-fill flag is not")
	}
	if err := h.checkBound(); err != nil {
		return nil, err
	}
	h.Dims = make([]uint64, nd)
	for i := range h.Dims {
		h.Dims[i] = le.Uint64(b[headerFixed+8*i:])
	}
	l, err := h.layout()
	if err != nil {
		return nil, formatErr("header geometry: %v", err)
	}
	if nc != l.chunks {
		return nil, formatErr("header field chunk_count = %d, but dims %s with %d tiles per chunk make %d chunks",
			nc, FormatDims(h.Dims), h.TilesPerChunk, l.chunks)
	}
	if uint64(len(b)) < need {
		return nil, formatErr("truncated chunk index: %d bytes, need %d", len(b), need)
	}
	ib := b[hs : need-4]
	if want, got := crc32c(ib), le.Uint32(b[need-4:]); want != got {
		return nil, formatErr("chunk index checksum mismatch (stored %08x, computed %08x): index corrupted", got, want)
	}
	h.HeaderSize = need
	h.Chunks = make([]Chunk, nc)
	next := need
	for i := range h.Chunks {
		e := ib[i*indexEntry:]
		c := Chunk{Offset: le.Uint64(e), Size: le.Uint64(e[8:]), CRC: le.Uint32(e[16:])}
		if le.Uint32(e[20:]) != 0 {
			return nil, formatErr("chunk %d: reserved index field is not zero", i)
		}
		if c.Offset != next {
			return nil, formatErr("chunk %d: offset %d, expected %d (chunks are contiguous)", i, c.Offset, next)
		}
		first, end := l.chunkTiles(uint64(i))
		if min := (end - first) * 12; c.Size < min || c.Size > math.MaxInt64-next {
			return nil, formatErr("chunk %d: size %d out of range (at least %d for %d tiles)", i, c.Size, min, end-first)
		}
		next += c.Size
		h.Chunks[i] = c
	}
	return h, nil
}

// VerifyChunk checks chunk i of blob (the whole container) against its CRC.
func (h *Header) VerifyChunk(blob []byte, i int) error {
	if i < 0 || i >= len(h.Chunks) {
		return fmt.Errorf("chunk %d does not exist (the container has %d)", i, len(h.Chunks))
	}
	c := h.Chunks[i]
	if uint64(len(blob)) < c.Offset+c.Size {
		return formatErr("chunk %d: truncated (needs bytes up to %d, container has %d)", i, c.Offset+c.Size, len(blob))
	}
	if got := crc32c(blob[c.Offset : c.Offset+c.Size]); got != c.CRC {
		return formatErr("chunk %d: checksum mismatch (index says %08x, data has %08x): chunk corrupted", i, c.CRC, got)
	}
	return nil
}
