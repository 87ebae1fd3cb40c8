package main

/*
#include "cgo.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// codecOptions turns fz_options (NULL: defaults) into fz options.
func codecOptions(o *C.fzgo_copts) ([]fz.Option, uint64, error) {
	opts := []fz.Option{fz.WithBackend(fz.CPU())}
	if o == nil {
		return opts, 0, nil
	}
	if o.struct_size < C.uint32_t(unsafe.Sizeof(C.fz_options{})) {
		return nil, 0, invalid("fz_options.struct_size is %d: set it to sizeof(fz_options) = %d", uint32(o.struct_size), unsafe.Sizeof(C.fz_options{}))
	}
	if o.workers < 0 {
		return nil, 0, invalid("fz_options.workers = %d: expected >= 0 (0: all cores)", int32(o.workers))
	}
	opts = append(opts, fz.WithWorkers(int(o.workers)))
	if o.tiles_per_chunk > 0 {
		if o.tiles_per_chunk > 1<<20 {
			return nil, 0, invalid("fz_options.tiles_per_chunk = %d: expected 1..%d (0: 256)", uint32(o.tiles_per_chunk), 1<<20)
		}
		opts = append(opts, fz.WithTilesPerChunk(int(o.tiles_per_chunk)))
	}
	if o.max_raw_bytes > 0 {
		opts = append(opts, fz.WithMaxRawSize(uint64(o.max_raw_bytes)))
	}
	// Checked for decompress too (which reads every version and ignores
	// it), so a bad value is an error wherever it is passed.
	if v := uint32(o.format_version); v > 2 {
		return nil, 0, invalid("fz_options.format_version = %d: expected 1 or 2 (0: the default, 1)", v)
	} else if v > 0 {
		opts = append(opts, fz.WithFormatVersion(int(v)))
	}
	return opts, uint64(o.max_raw_bytes), nil
}

func dimsOf(p *C.fzgo_cu64, n C.int32_t) ([]uint64, error) {
	if n < 1 || n > fz.MaxDims {
		return nil, invalid("ndims = %d: expected 1..%d", int32(n), fz.MaxDims)
	}
	if p == nil {
		return nil, invalid("dims is NULL")
	}
	src := unsafe.Slice((*uint64)(unsafe.Pointer(p)), int(n))
	return append([]uint64(nil), src...), nil
}

//export fz_compress
func fz_compress(src *C.fzgo_cvoid, srcLen C.uint64_t, dtype C.int32_t, dims *C.fzgo_cu64, ndims C.int32_t,
	mode C.int32_t, bound C.double, fill *C.fzgo_cdouble, opts *C.fzgo_copts,
	out *unsafe.Pointer, outLen *C.uint64_t, stats *C.fz_stats) C.fz_status {
	return call(func() error {
		if out == nil || outLen == nil {
			return invalid("fz_compress: out and out_len must not be NULL")
		}
		*out, *outLen = nil, 0
		raw, err := cbytes(unsafe.Pointer(src), srcLen, "src")
		if err != nil {
			return err
		}
		d, err := dimsOf(dims, ndims)
		if err != nil {
			return err
		}
		p := fz.Params{DType: fz.DType(dtype), Dims: d, Mode: fz.Mode(mode), Bound: float64(bound)}
		if dtype != C.FZ_F32 && dtype != C.FZ_F64 {
			return invalid("dtype = %d: expected FZ_F32 (1) or FZ_F64 (2)", int32(dtype))
		}
		if mode != C.FZ_ABS && mode != C.FZ_REL {
			return invalid("mode = %d: expected FZ_ABS (1) or FZ_REL (2)", int32(mode))
		}
		if fill != nil {
			f := float64(*fill)
			p.Fill = &f
		}
		if err := p.Validate(int64(len(raw))); err != nil {
			return invalid("%w", err)
		}
		o, _, err := codecOptions(opts)
		if err != nil {
			return err
		}
		blob, st, err := fz.Compress(context.Background(), raw, p, o...)
		if err != nil {
			return err
		}
		*out = cmalloc(blob)
		*outLen = C.uint64_t(len(blob))
		if stats != nil {
			*stats = C.fz_stats{raw_bytes: C.uint64_t(st.RawBytes), compressed_bytes: C.uint64_t(st.CompressedBytes),
				abs_eb: C.double(st.AbsEB), max_abs_err: C.double(st.MaxAbsErr), outliers: C.uint64_t(st.Outliers),
				ratio: C.double(st.Ratio())}
		}
		return nil
	})
}

// headerOf parses a container prefix; a too-short prefix is FZ_ESIZE and
// need says how many bytes the header and index take (0 if unknown).
func headerOf(blob []byte) (h *fz.Header, need uint64, err error) {
	if len(blob) < 88 {
		return nil, 88, sizeErr("container prefix is %d bytes: the header needs at least 88", len(blob))
	}
	need, err = fz.PeekHeaderSize(blob)
	if err != nil {
		return nil, 0, err
	}
	if uint64(len(blob)) < need {
		return nil, need, sizeErr("container prefix is %d bytes: its header and chunk index need %d", len(blob), need)
	}
	h, err = fz.ReadHeader(blob)
	return h, need, err
}

// blobHeader views the caller's container (blob, blobLen) and parses its
// header as headerOf does.
func blobHeader(blob *C.fzgo_cvoid, blobLen C.uint64_t) (b []byte, h *fz.Header, need uint64, err error) {
	b, err = cbytes(unsafe.Pointer(blob), blobLen, "blob")
	if err != nil {
		return nil, nil, 0, err
	}
	h, need, err = headerOf(b)
	return b, h, need, err
}

// dstBytes views the caller's destination (dst, dstLen), which must be
// exactly need bytes: the size error says it is for what.
func dstBytes(dst unsafe.Pointer, dstLen C.uint64_t, need uint64, what string) ([]byte, error) {
	if uint64(dstLen) != need {
		return nil, sizeErr("destination is %d bytes, %s needs %d", uint64(dstLen), what, need)
	}
	return cbytes(dst, dstLen, "dst")
}

func fillInfo(info *C.fz_info, h *fz.Header) {
	*info = C.fz_info{}
	info.dtype = C.int32_t(h.DType)
	info.mode = C.int32_t(h.Mode)
	info.ndims = C.int32_t(len(h.Dims))
	for i, d := range h.Dims {
		info.dims[i] = C.uint64_t(d)
	}
	if h.Fill != nil {
		info.has_fill = 1
		info.fill = C.double(*h.Fill)
	}
	info.bound = C.double(h.Bound)
	info.abs_eb = C.double(h.AbsEB)
	info.range_min = C.double(h.RangeMin)
	info.range_max = C.double(h.RangeMax)
	info.elements = C.uint64_t(h.Elements())
	info.raw_bytes = C.uint64_t(h.RawSize())
	info.compressed_bytes = C.uint64_t(h.CompressedSize())
	info.header_bytes = C.uint64_t(h.HeaderSize)
	info.chunks = C.uint64_t(len(h.Chunks))
	if c := h.CompressedSize(); c > 0 {
		info.ratio = C.double(float64(h.RawSize()) / float64(c))
	}
	info.version = C.uint32_t(h.Version)
}

//export fz_read_header
func fz_read_header(blob *C.fzgo_cvoid, blobLen C.uint64_t, info *C.fz_info) C.fz_status {
	return call(func() error {
		if info == nil {
			return invalid("fz_read_header: info must not be NULL")
		}
		*info = C.fz_info{}
		_, h, need, err := blobHeader(blob, blobLen)
		if err != nil {
			info.header_bytes = C.uint64_t(need)
			return err
		}
		fillInfo(info, h)
		return nil
	})
}

//export fz_decompressed_size
func fz_decompressed_size(blob *C.fzgo_cvoid, blobLen C.uint64_t, rawBytes *C.uint64_t) C.fz_status {
	return call(func() error {
		if rawBytes == nil {
			return invalid("fz_decompressed_size: raw_bytes must not be NULL")
		}
		*rawBytes = 0
		_, h, _, err := blobHeader(blob, blobLen)
		if err != nil {
			return err
		}
		*rawBytes = C.uint64_t(h.RawSize())
		return nil
	})
}

//export fz_decompress
func fz_decompress(blob *C.fzgo_cvoid, blobLen C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t,
	opts *C.fzgo_copts, info *C.fz_info) C.fz_status {
	return call(func() error {
		if info != nil {
			*info = C.fz_info{}
		}
		b, h, _, err := blobHeader(blob, blobLen)
		if err != nil {
			return err
		}
		o, maxRaw, err := codecOptions(opts)
		if err != nil {
			return err
		}
		if maxRaw > 0 && h.RawSize() > maxRaw {
			return invalid("container decodes to %d bytes, more than max_raw_bytes %d", h.RawSize(), maxRaw)
		}
		d, err := dstBytes(dst, dstLen, h.RawSize(), fmt.Sprintf("the field (%s %s)", h.DType, fz.FormatDims(h.Dims)))
		if err != nil {
			return err
		}
		if _, err := fz.DecompressTo(context.Background(), b, d, o...); err != nil {
			return err
		}
		if info != nil {
			fillInfo(info, h)
		}
		return nil
	})
}

// regionBytes is the byte size of [lo, hi) of dims[0].
func regionBytes(h *fz.Header, lo, hi uint64) (uint64, error) {
	if lo >= hi || hi > h.Dims[0] {
		return 0, invalid("region %d:%d is not inside dimension 0 (0:%d): expected lo < hi <= %d", lo, hi, h.Dims[0], h.Dims[0])
	}
	per := h.Elements() / h.Dims[0]
	if per > math.MaxUint64/8/(hi-lo) {
		return 0, invalid("region %d:%d is too large", lo, hi)
	}
	return (hi - lo) * per * uint64(h.DType.Size()), nil
}

//export fz_region_size
func fz_region_size(blob *C.fzgo_cvoid, blobLen C.uint64_t, lo, hi C.uint64_t, bytes *C.uint64_t) C.fz_status {
	return call(func() error {
		if bytes == nil {
			return invalid("fz_region_size: bytes must not be NULL")
		}
		*bytes = 0
		_, h, _, err := blobHeader(blob, blobLen)
		if err != nil {
			return err
		}
		n, err := regionBytes(h, uint64(lo), uint64(hi))
		*bytes = C.uint64_t(n)
		return err
	})
}

//export fz_decompress_region
func fz_decompress_region(blob *C.fzgo_cvoid, blobLen C.uint64_t, lo, hi C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t) C.fz_status {
	return call(func() error {
		b, h, _, err := blobHeader(blob, blobLen)
		if err != nil {
			return err
		}
		if uint64(len(b)) < h.CompressedSize() {
			return &statusError{C.FZ_EFORMAT, fmt.Errorf("%w: container is %d bytes, its index says %d (truncated)", fz.ErrFormat, len(b), h.CompressedSize())}
		}
		n, err := regionBytes(h, uint64(lo), uint64(hi))
		if err != nil {
			return err
		}
		d, err := dstBytes(dst, dstLen, n, fmt.Sprintf("region %d:%d", uint64(lo), uint64(hi)))
		if err != nil {
			return err
		}
		raw, err := fz.DecodeRegion(context.Background(), h, fz.Region{Lo: uint64(lo), Hi: uint64(hi)}, func(i int) ([]byte, error) {
			c := h.Chunks[i]
			return b[c.Offset : c.Offset+c.Size], nil
		})
		if err != nil {
			return err
		}
		copy(d, raw)
		return nil
	})
}
