package fz

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// ChunkError is what is wrong with one chunk (Chunk −1: the container as
// a whole).
type ChunkError struct {
	Chunk int
	Err   error
}

// CheckContainer checks blob (h its header, from ReadHeader) as
// Decompress would — its size, every chunk's checksum and every tile's
// structure — without keeping the values: each of the workers holds one
// chunk's span of the field at a time. It returns every problem found, in
// chunk order (none: Decompress succeeds), or ctx's error.
func CheckContainer(ctx context.Context, h *Header, blob []byte, workers int) ([]ChunkError, error) {
	var bad []ChunkError
	if err := checkWhole(h, blob); err != nil {
		bad = append(bad, ChunkError{-1, err})
	}
	l, err := h.layout()
	if err != nil {
		return append(bad, ChunkError{-1, formatErr("%v", err)}), nil
	}
	var next atomic.Uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := new(tileScratch)
			var buf []byte
			for {
				c := next.Add(1) - 1
				if c >= uint64(len(h.Chunks)) || ctx.Err() != nil {
					return
				}
				ch := h.Chunks[c]
				var err error
				if uint64(len(blob)) < ch.Offset || uint64(len(blob))-ch.Offset < ch.Size {
					err = formatErr("chunk %d: truncated (needs bytes up to %d, container has %d)", c, ch.Offset+ch.Size, len(blob))
				} else {
					// The chunk's tiles cover field elements [b0, b1).
					first, end := l.chunkTiles(c)
					b0, _ := l.tileSpan(first)
					_, b1 := l.tileSpan(end - 1)
					buf = slices.Grow(buf[:0], int((b1-b0)*uint64(h.DType.Size())))[:(b1-b0)*uint64(h.DType.Size())]
					b := blob[ch.Offset : ch.Offset+ch.Size]
					if h.DType == Float32 {
						err = decodeChunk(s, b, ch.CRC, asFloats[float32](buf), b0, l, h.Version, c, 0, end, h.Step, fillValue[float32](h))
					} else {
						err = decodeChunk(s, b, ch.CRC, asFloats[float64](buf), b0, l, h.Version, c, 0, end, h.Step, fillValue[float64](h))
					}
				}
				if err != nil {
					mu.Lock()
					bad = append(bad, ChunkError{int(c), err})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(bad, func(a, b ChunkError) int { return a.Chunk - b.Chunk })
	return bad, nil
}
