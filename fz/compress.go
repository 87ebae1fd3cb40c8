package fz

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"
)

// Stats describe one compression.
type Stats struct {
	RawBytes        uint64
	CompressedBytes uint64
	AbsEB           float64 // absolute error bound every finite value meets
	MaxAbsErr       float64 // largest |x − x'| over the finite, non-fill values
	Outliers        uint64  // values stored losslessly (not counting fill)
}

// Ratio is RawBytes / CompressedBytes.
func (s Stats) Ratio() float64 {
	if s.CompressedBytes == 0 {
		return 0
	}
	return float64(s.RawBytes) / float64(s.CompressedBytes)
}

// Compress encodes src, the raw little-endian values of a field described
// by p, into a self-describing container. The result does not depend on
// the number of workers.
func Compress(ctx context.Context, src []byte, p Params, opts ...Option) ([]byte, Stats, error) {
	if err := p.Validate(int64(len(src))); err != nil {
		return nil, Stats{}, err
	}
	o := buildOptions(opts)
	if _, err := o.formatVersion(); err != nil {
		return nil, Stats{}, err
	}
	if err := o.tiling.check(); err != nil {
		return nil, Stats{}, err
	}
	if o.backend != nil {
		return o.backend.Compress(ctx, src, p, opts...)
	}
	switch p.DType {
	case Float32:
		return compressTyped(ctx, asFloats[float32](src), p, o)
	default:
		return compressTyped(ctx, asFloats[float64](src), p, o)
	}
}

// asFloats views little-endian bytes as values without copying.
func asFloats[T float](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

func asBytes[T float](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

func compressTyped[T float](ctx context.Context, src []T, p Params, o options) ([]byte, Stats, error) {
	l, err := planLayout(p.DType, p.Dims, o.tilesPerChunk, o.tiling)
	if err != nil {
		return nil, Stats{}, err
	}
	version, err := o.formatVersion()
	if err != nil {
		return nil, Stats{}, err
	}
	h := &Header{
		Version: version, DType: p.DType, Mode: p.Mode, Dims: append([]uint64(nil), p.Dims...),
		Bound: p.Bound, Tile: [3]int{l.tz, l.ty, l.tx}, Block: [3]int{l.bz, l.by, l.bx}, TilesPerChunk: uint32(o.tilesPerChunk),
		RangeMin: notComputed, RangeMax: notComputed, Flat: l.flat, Padded: l.padded,
		Chunks: make([]Chunk, l.chunks),
	}
	qz := &quantizer{}
	if p.Fill != nil {
		f := *p.Fill
		h.Fill = &f
		h.FillBits = bitsOf(T(f))
		if math.IsNaN(f) {
			// The quiet NaN that numpy and C write; Go's math.NaN differs.
			h.FillBits = 0x7FF8000000000000
			if unsafe.Sizeof(T(0)) == 4 {
				h.FillBits = 0x7FC00000
			}
		}
		qz.hasFill, qz.fillBits = true, h.FillBits
	}

	// The absolute bound. For rel, the range covers finite non-fill values.
	var lo, hi float64
	var have bool
	if p.Mode == Rel {
		lo, hi, have = valueRange(src, qz, o.workers)
		if have {
			h.RangeMin, h.RangeMax = lo, hi
		}
	}
	if h.AbsEB, h.Step, err = DeriveBound(p, lo, hi, have); err != nil {
		return nil, Stats{}, err
	}
	qz.step, qz.eb, qz.inv = h.Step, h.AbsEB, 1/h.Step

	out := make([]byte, 0, fixedSize(len(h.Dims))+int(l.chunks)*indexEntry+4+len(src)*int(unsafe.Sizeof(T(0)))/8+1024)
	out = h.appendHeader(out)
	h.HeaderSize = uint64(len(out))
	st := Stats{RawBytes: uint64(len(src)) * uint64(unsafe.Sizeof(T(0))), AbsEB: h.AbsEB}
	if l.chunks > 0 {
		out, err = encodeChunks(ctx, src, l, qz, h, out, o, &st)
		if err != nil {
			return nil, Stats{}, err
		}
	}
	// Patch the index now that every chunk's place and checksum is known.
	hs := fixedSize(len(h.Dims))
	for i, c := range h.Chunks {
		e := out[hs+i*indexEntry:]
		binary.LittleEndian.PutUint64(e, c.Offset)
		binary.LittleEndian.PutUint64(e[8:], c.Size)
		binary.LittleEndian.PutUint32(e[16:], c.CRC)
	}
	ie := hs + len(h.Chunks)*indexEntry
	binary.LittleEndian.PutUint32(out[ie:], crc32c(out[hs:ie]))
	st.CompressedBytes = uint64(len(out))
	return out, st, nil
}

// valueRange returns min and max over finite non-fill values.
func valueRange[T float](src []T, qz *quantizer, workers int) (lo, hi float64, have bool) {
	type part struct {
		lo, hi T
		ok     bool
	}
	parts := make([]part, workers)
	var wg sync.WaitGroup
	per := (len(src) + workers - 1) / workers
	for w := 0; w < workers; w++ {
		a := min(w*per, len(src))
		b := min(a+per, len(src))
		wg.Add(1)
		go func(w int, s []T) {
			defer wg.Done()
			pl, ph := T(math.Inf(1)), T(math.Inf(-1))
			if !qz.hasFill && !useSIMD {
				// Comparisons are false for NaN, so NaN never enters; ±Inf
				// would, and then the careful loop below runs instead.
				for _, x := range s {
					if x < pl {
						pl = x
					}
					if x > ph {
						ph = x
					}
				}
			}
			if qz.hasFill || useSIMD || math.IsInf(float64(pl), 0) || math.IsInf(float64(ph), 0) {
				// The careful rule: finite (x-x == 0 is false for NaN and
				// ±Inf) and not fill. The kernel applies it to whole groups
				// of 8 and the loop to the rest; min and max do not depend
				// on the order, up to the sign of a zero, normalised below.
				pl, ph = T(math.Inf(1)), T(math.Inf(-1))
				rest := s
				if useSIMD {
					pl, ph = rangeSIMD(s, qz)
					rest = s[len(s)&^7:]
				}
				for _, x := range rest {
					if x-x != 0 || (qz.hasFill && bitsOf(x) == qz.fillBits) {
						continue
					}
					pl = min(pl, x)
					ph = max(ph, x)
				}
			}
			parts[w] = part{pl, ph, pl <= ph}
		}(w, src[a:b])
	}
	wg.Wait()
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range parts {
		if p.ok {
			lo, hi, have = min(lo, float64(p.lo)), max(hi, float64(p.hi)), true
		}
	}
	if !have {
		return 0, 0, false
	}
	// min/max of −0 and +0 depend on order; the header must not.
	if lo == 0 {
		lo = 0
	}
	if hi == 0 {
		hi = 0
	}
	return lo, hi, true
}

// rangeSIMD is the range kernel over the first len(s)&^7 values: min and
// max over finite non-fill values, ±Inf when there are none.
func rangeSIMD[T float](s []T, qz *quantizer) (lo, hi T) {
	n := len(s) &^ 7
	if n == 0 {
		return T(math.Inf(1)), T(math.Inf(-1))
	}
	if unsafe.Sizeof(lo) == 4 {
		l, h := rangeF32AVX2((*float32)(unsafe.Pointer(&s[0])), n, qz.fillBits, qz.hasFill)
		return T(l), T(h)
	}
	l, h := rangeF64AVX2((*float64)(unsafe.Pointer(&s[0])), n, qz.fillBits, qz.hasFill)
	return T(l), T(h)
}

type chunkResult struct {
	buf []byte
	st  tileStats
	err error
}

var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// encodeChunks encodes chunks in parallel and appends them in order; at
// most 2×workers encoded chunks wait in memory at any time.
func encodeChunks[T float](ctx context.Context, src []T, l *layout, qz *quantizer, h *Header, out []byte, o options, st *Stats) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		c  uint64
		ch chan chunkResult
	}
	jobs := make(chan job)
	futures := make(chan chan chunkResult, 2*o.workers)
	go func() {
		defer close(futures)
		defer close(jobs)
		for c := uint64(0); c < l.chunks; c++ {
			ch := make(chan chunkResult, 1)
			select {
			case futures <- ch:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- job{c, ch}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < o.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := new(tileScratch)
			for j := range jobs {
				bp := bufPool.Get().(*[]byte)
				var ts tileStats
				buf := encodeChunk(s, &ts, src, l, j.c, qz, h.Version, (*bp)[:0])
				j.ch <- chunkResult{buf: buf, st: ts}
			}
		}()
	}
	defer wg.Wait()
	var done uint64
	total := uint64(len(src)) * uint64(unsafe.Sizeof(T(0)))
	c := 0
	for ch := range futures {
		var r chunkResult
		select {
		case r = <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("compress: %w", ctx.Err())
		}
		off := uint64(len(out))
		out = append(out, r.buf...)
		h.Chunks[c] = Chunk{Offset: off, Size: uint64(len(r.buf)), CRC: crc32c(r.buf)}
		b := r.buf
		bufPool.Put(&b)
		st.MaxAbsErr = max(st.MaxAbsErr, r.st.maxErr)
		st.Outliers += r.st.outliers
		if o.progress != nil {
			done += l.chunkElems(uint64(c)) * uint64(unsafe.Sizeof(T(0)))
			o.progress(min(done, total), total)
		}
		c++
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	return out, nil
}

// encodeChunk appends chunk c: a table of tile sizes, then the tiles in
// container version ver.
func encodeChunk[T float](s *tileScratch, ts *tileStats, src []T, l *layout, c uint64, qz *quantizer, ver uint16, dst []byte) []byte {
	first, end := l.chunkTiles(c)
	nt := int(end - first)
	at0 := len(dst)
	dst = slices.Grow(dst, 4*nt)[:at0+4*nt]
	clear(dst[at0:])
	for t := first; t < end; t++ {
		at := len(dst)
		if ver == Version2 {
			dst = encodeTileV2(s, ts, src, l, t, qz, dst)
		} else {
			dst = encodeTile(s, ts, src, l, t, qz, dst)
		}
		binary.LittleEndian.PutUint32(dst[at0+4*int(t-first):], uint32(len(dst)-at))
	}
	return dst
}
