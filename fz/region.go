package fz

import (
	"context"
	"fmt"
)

// Region is a range [Lo, Hi) of indices along the slowest dimension
// (dims[0]): e.g. some time steps or levels of a snapshot.
type Region struct{ Lo, Hi uint64 }

// RegionChunks returns the chunks [first, end) that hold region r, so a
// caller can fetch only those (e.g. with ranged reads).
func (h *Header) RegionChunks(r Region) (first, end int, err error) {
	l, t0, t1, _, _, err := h.regionTiles(r)
	if err != nil || t0 == t1 {
		return 0, 0, err
	}
	return int(t0 / l.perChunk), int((t1-1)/l.perChunk + 1), nil
}

// regionTiles maps a region to the tiles [t0, t1) that cover it and to the
// element range [e0, e1) it occupies in the field.
func (h *Header) regionTiles(r Region) (l *layout, t0, t1, e0, e1 uint64, err error) {
	if len(h.Dims) == 0 || r.Lo >= r.Hi || r.Hi > h.Dims[0] {
		return nil, 0, 0, 0, 0, fmt.Errorf("region %d:%d is not inside dimension 0 (0:%d)", r.Lo, r.Hi, h.Dims[0])
	}
	if l, err = h.layout(); err != nil {
		return nil, 0, 0, 0, 0, formatErr("%v", err)
	}
	if l.n == 0 {
		return l, 0, 0, 0, 0, nil // no values, no tiles
	}
	per := l.n / h.Dims[0] // elements per index of dims[0]
	e0, e1 = r.Lo*per, r.Hi*per
	if l.flat {
		// Tile t is the flat indices [4096t, 4096t+4096).
		return l, e0 / TileElems, ceilDiv(e1, TileElems), e0, e1, nil
	}
	// The folded slowest axis and the elements per index along it.
	slowExt, inner, tileExt, tilesPer := l.nz, l.ny*l.nx, uint64(l.tz), l.gy*l.gx
	switch {
	case l.nz == 1 && l.ny == 1:
		slowExt, inner, tileExt, tilesPer = l.nx, 1, uint64(l.tx), 1
	case l.nz == 1:
		slowExt, inner, tileExt, tilesPer = l.ny, l.nx, uint64(l.ty), l.gx
	}
	s0, s1 := e0/inner, (e1+inner-1)/inner
	if s1 > slowExt {
		s1 = slowExt
	}
	t0 = s0 / tileExt * tilesPer
	t1 = ceilDiv(s1, tileExt) * tilesPer
	return l, t0, min(t1, l.tiles), e0, e1, nil
}

// DecodeRegion decodes region r of a container whose header is h, fetching
// only the chunks it needs through fetch (chunk index → the chunk's bytes,
// e.g. a ranged read at h.Chunks[i].Offset). Memory is proportional to the
// region, not the field.
func DecodeRegion(ctx context.Context, h *Header, r Region, fetch func(chunk int) ([]byte, error)) ([]byte, error) {
	l, t0, t1, e0, e1, err := h.regionTiles(r)
	if err != nil {
		return nil, err
	}
	if t0 == t1 {
		return []byte{}, nil
	}
	// Decode whole tiles into a buffer covering their rows, then cut.
	b0, _ := l.tileSpan(t0)
	_, b1 := l.tileSpan(t1 - 1)
	if b0 > e0 || b1 < e1 {
		return nil, fmt.Errorf("fz: internal error: tiles cover %d:%d, region needs %d:%d", b0, b1, e0, e1)
	}
	size := uint64(h.DType.Size())
	buf := make([]byte, (b1-b0)*size)
	s := new(tileScratch)
	for c := t0 / l.perChunk; c <= (t1-1)/l.perChunk; c++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := fetch(int(c))
		if err != nil {
			return nil, fmt.Errorf("fetch chunk %d: %w", c, err)
		}
		ch := h.Chunks[c]
		if uint64(len(b)) != ch.Size {
			return nil, formatErr("chunk %d: fetched %d bytes, index says %d", c, len(b), ch.Size)
		}
		if h.DType == Float32 {
			err = decodeChunk(s, b, ch.CRC, asFloats[float32](buf), b0, l, h.Version, c, t0, t1, h.Step, fillValue[float32](h))
		} else {
			err = decodeChunk(s, b, ch.CRC, asFloats[float64](buf), b0, l, h.Version, c, t0, t1, h.Step, fillValue[float64](h))
		}
		if err != nil {
			return nil, err
		}
	}
	return buf[(e0-b0)*size : (e1-b0)*size], nil
}
