package fz

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// Decompress decodes a container into raw little-endian values.
func Decompress(ctx context.Context, blob []byte, opts ...Option) (*Header, []byte, error) {
	h, err := ReadHeader(blob)
	if err != nil {
		return nil, nil, err
	}
	if err := checkWhole(h, blob); err != nil {
		return nil, nil, err
	}
	o := buildOptions(opts)
	if o.maxRaw > 0 && h.RawSize() > o.maxRaw {
		return nil, nil, fmt.Errorf("container decodes to %d bytes, more than the allowed %d", h.RawSize(), o.maxRaw)
	}
	dst := make([]byte, h.RawSize())
	if o.backend != nil {
		if _, err := o.backend.DecompressTo(ctx, blob, dst, opts...); err != nil {
			return nil, nil, err
		}
		return h, dst, nil
	}
	if err := decodeInto(ctx, h, blob, dst, o); err != nil {
		return nil, nil, err
	}
	return h, dst, nil
}

// DecompressTo decodes a container into dst, which must be exactly
// h.RawSize() bytes (e.g. a shared-memory mapping).
func DecompressTo(ctx context.Context, blob, dst []byte, opts ...Option) (*Header, error) {
	h, err := ReadHeader(blob)
	if err != nil {
		return nil, err
	}
	if err := checkWhole(h, blob); err != nil {
		return nil, err
	}
	if uint64(len(dst)) != h.RawSize() {
		return nil, fmt.Errorf("destination is %d bytes, the field needs %d", len(dst), h.RawSize())
	}
	o := buildOptions(opts)
	if o.backend != nil {
		return o.backend.DecompressTo(ctx, blob, dst, opts...)
	}
	return h, decodeInto(ctx, h, blob, dst, o)
}

func checkWhole(h *Header, blob []byte) error {
	if want := h.CompressedSize(); uint64(len(blob)) != want {
		return formatErr("container is %d bytes, its index says %d", len(blob), want)
	}
	return nil
}

func decodeInto(ctx context.Context, h *Header, blob, dst []byte, o options) error {
	l, err := h.layout()
	if err != nil {
		return formatErr("%v", err)
	}
	if h.DType == Float32 {
		return decodeChunks(ctx, h, l, blob, asFloats[float32](dst), o)
	}
	return decodeChunks(ctx, h, l, blob, asFloats[float64](dst), o)
}

func fillValue[T float](h *Header) T {
	if h.Fill == nil {
		return 0
	}
	return fromBits[T](h.FillBits)
}

func decodeChunks[T float](ctx context.Context, h *Header, l *layout, blob []byte, dst []T, o options) error {
	var next atomic.Uint64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var failed atomic.Bool
	var done atomic.Uint64
	total := h.RawSize()
	size := uint64(h.DType.Size())
	var progMu sync.Mutex
	for w := 0; w < o.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := new(tileScratch)
			for !failed.Load() {
				c := next.Add(1) - 1
				if c >= uint64(len(h.Chunks)) {
					return
				}
				err := ctx.Err()
				if err == nil {
					ch := h.Chunks[c]
					err = decodeChunk(s, blob[ch.Offset:ch.Offset+ch.Size], ch.CRC, dst, 0, l, h.Version, c, 0, math.MaxUint64, h.Step, fillValue[T](h))
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
				if o.progress != nil {
					d := done.Add(l.chunkElems(c) * size)
					progMu.Lock()
					o.progress(d, total)
					progMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// decodeChunk checks chunk c (its bytes only) of a container of version ver
// and decodes its tiles that fall in [t0, t1) into dst, which starts at
// field element base.
func decodeChunk[T float](s *tileScratch, b []byte, crc uint32, dst []T, base uint64, l *layout, ver uint16, c, t0, t1 uint64, step float64, fill T) error {
	if got := crc32c(b); got != crc {
		return formatErr("chunk %d: checksum mismatch (index says %08x, data has %08x): chunk corrupted", c, crc, got)
	}
	first, end := l.chunkTiles(c)
	nt := int(end - first)
	if len(b) < 4*nt {
		return formatErr("chunk %d: %d bytes cannot hold its %d-entry tile table", c, len(b), nt)
	}
	pos := 4 * nt
	for i := 0; i < nt; i++ {
		sz := int(binary.LittleEndian.Uint32(b[4*i:]))
		if sz < 8 || sz%4 != 0 || sz > len(b)-pos {
			return formatErr("chunk %d, tile %d: size %d invalid (multiple of 4, at least 8, at most the %d bytes left)", c, i, sz, len(b)-pos)
		}
		if t := first + uint64(i); t >= t0 && t < t1 {
			var err error
			if ver == Version2 {
				err = decodeTileV2(s, b[pos:pos+sz], dst, base, l, t, step, fill)
			} else {
				err = decodeTile(s, b[pos:pos+sz], dst, base, l, t, step, fill)
			}
			if err != nil {
				return formatErr("chunk %d, tile %d: %v", c, i, err)
			}
		}
		pos += sz
	}
	if pos != len(b) {
		return formatErr("chunk %d: %d bytes after its last tile", c, len(b)-pos)
	}
	return nil
}
