package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
)

func init() {
	register(&command{name: "inspect", summary: "print an .fz container's header, chunks and ratio; check it as decompress does", run: runInspect})
}

// inspectReport is inspect's output. Floats that may be NaN or ±Inf (a
// fill value) are ingest.Float: JSON strings "nan", "inf", "-inf".
type inspectReport struct {
	File            string        `json:"file"`
	Version         uint16        `json:"version"`
	DType           string        `json:"dtype"`
	Dims            []uint64      `json:"dims"`
	Mode            string        `json:"mode"`
	Bound           float64       `json:"bound"`
	AbsEB           float64       `json:"abs_eb"`
	Step            float64       `json:"step"`
	Fill            *ingest.Float `json:"fill,omitempty"`
	FillBits        string        `json:"fill_bits,omitempty"` // hex, in dtype
	RangeMin        *float64      `json:"range_min,omitempty"`
	RangeMax        *float64      `json:"range_max,omitempty"`
	Tiling          string        `json:"tiling"` // boxes, flat (flags bit 1, docs/FORMAT.md §3.1) or padded (bit 2, §3.2)
	Tile            [3]int        `json:"tile"`
	Block           [3]int        `json:"sub_block"`
	TilesPerChunk   uint32        `json:"tiles_per_chunk"`
	Chunks          int           `json:"chunks"`
	RawBytes        uint64        `json:"raw_bytes"`
	CompressedBytes uint64        `json:"compressed_bytes"`
	Ratio           float64       `json:"ratio"`
	BitsPerValue    float64       `json:"bits_per_value"`
	HeaderCRC       string        `json:"header_crc"`
	ChunkCRC        string        `json:"chunk_crc"`
	// Decode is "ok" (every chunk decodes, as in decompress), "failed"
	// or "skipped" (--no-decode: checksums only).
	Decode    string     `json:"decode"`
	BadChunks []badChunk `json:"bad_chunks,omitempty"`
}

type badChunk struct {
	Chunk int    `json:"chunk"`
	Error string `json:"error"`
}

func finiteOrNil(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

func runInspect(ctx context.Context, args []string) error {
	fs := newFlags("inspect", "inspect [--json] [--no-decode] IN.fz   (exits 1 if the container is damaged)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	noDecode := fs.Bool("no-decode", false, "check the header and the checksums only, not the tiles inside the chunks (faster on big files)")
	workers := fs.Int("workers", 0, "CPU worker count for the decode check (default: all cores)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(fs, "expected one .fz file, got %d", len(pos))
	}
	in, err := openInput(pos[0])
	if err != nil {
		return err
	}
	defer in.Close()
	h, err := fz.ReadHeader(in.data)
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	r := inspectReport{
		File: pos[0], Version: h.Version, DType: h.DType.String(), Dims: h.Dims, Mode: h.Mode.String(),
		Bound: h.Bound, AbsEB: h.AbsEB, Step: h.Step,
		RangeMin: finiteOrNil(h.RangeMin), RangeMax: finiteOrNil(h.RangeMax),
		Tiling: tilingName(h), Tile: h.Tile, Block: h.Block, TilesPerChunk: h.TilesPerChunk, Chunks: len(h.Chunks),
		RawBytes: h.RawSize(), CompressedBytes: uint64(len(in.data)), HeaderCRC: "ok", ChunkCRC: "ok", Decode: "ok",
	}
	if h.Fill != nil {
		f := ingest.Float(*h.Fill)
		r.Fill = &f
		r.FillBits = fmt.Sprintf("%#0*x", 2*h.DType.Size(), h.FillBits) // Go pads the digits; 0x comes on top
	}
	if r.CompressedBytes > 0 {
		r.Ratio = float64(r.RawBytes) / float64(r.CompressedBytes)
	}
	if n := h.Elements(); n > 0 {
		r.BitsPerValue = float64(r.CompressedBytes) * 8 / float64(n)
	}
	if want := h.CompressedSize(); want != uint64(len(in.data)) {
		r.BadChunks = append(r.BadChunks, badChunk{-1, fmt.Sprintf("container is %d bytes, its index says %d", len(in.data), want)})
	}
	crcBad := 0
	for i := range h.Chunks {
		if err := h.VerifyChunk(in.data, i); err != nil {
			r.BadChunks = append(r.BadChunks, badChunk{i, err.Error()})
			crcBad++
		}
	}
	if crcBad > 0 {
		r.ChunkCRC = fmt.Sprintf("%d bad", crcBad)
	}
	switch {
	case *noDecode:
		r.Decode = "skipped"
	case len(r.BadChunks) > 0:
		r.Decode = "failed" // decompress stops at the first problem, as here
	default:
		// The tiles inside the chunks, as decompress checks them, without
		// keeping the values.
		w := *workers
		if w < 1 {
			w = runtime.GOMAXPROCS(0)
		}
		bad, err := fz.CheckContainer(ctx, h, in.data, w)
		if err != nil {
			return fmt.Errorf("%s: %w", pos[0], err)
		}
		for _, b := range bad {
			r.BadChunks = append(r.BadChunks, badChunk{b.Chunk, b.Err.Error()})
		}
		if len(bad) > 0 {
			r.Decode = "failed"
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		w := os.Stdout
		fmt.Fprintf(w, "file             %s\n", r.File)
		fmt.Fprintf(w, "format           FZSC version %d\n", r.Version)
		fmt.Fprintf(w, "field            %s %s (%d values)\n", r.DType, fz.FormatDims(r.Dims), h.Elements())
		fmt.Fprintf(w, "bound            %s %g -> absolute %g (step %g)\n", r.Mode, r.Bound, r.AbsEB, r.Step)
		if r.RangeMin != nil || r.RangeMax != nil {
			fmt.Fprintf(w, "value range      [%s, %s]\n", optFloat(r.RangeMin), optFloat(r.RangeMax))
		}
		if r.Fill != nil {
			fmt.Fprintf(w, "fill value       %g (bits %s)\n", float64(*r.Fill), r.FillBits)
		}
		if h.Flat {
			fmt.Fprintf(w, "tiles            flat: runs of %d consecutive values (flags bit 1), sub-blocks %dx%dx%d, %d tiles per chunk\n", r.Tile[0]*r.Tile[1]*r.Tile[2], r.Block[0], r.Block[1], r.Block[2], r.TilesPerChunk)
		} else {
			padded := ""
			if h.Padded {
				padded = " (padded: clipped tiles coded as full ones, flags bit 2)"
			}
			fmt.Fprintf(w, "tiles            %dx%dx%d%s, sub-blocks %dx%dx%d, %d tiles per chunk\n", r.Tile[0], r.Tile[1], r.Tile[2], padded, r.Block[0], r.Block[1], r.Block[2], r.TilesPerChunk)
		}
		fmt.Fprintf(w, "chunks           %d\n", r.Chunks)
		fmt.Fprintf(w, "size             %d -> %d bytes, ratio %.3f, %.3f bits/value\n", r.RawBytes, r.CompressedBytes, r.Ratio, r.BitsPerValue)
		fmt.Fprintf(w, "header checksum  %s\n", r.HeaderCRC)
		fmt.Fprintf(w, "chunk checksums  %s\n", r.ChunkCRC)
		switch r.Decode {
		case "ok":
			fmt.Fprintf(w, "decode           ok (every tile checked as decompress does)\n")
		case "skipped":
			fmt.Fprintf(w, "decode           not decoded (--no-decode): the tiles inside the chunks were not checked\n")
		default:
			fmt.Fprintf(w, "decode           failed\n")
		}
		for _, b := range r.BadChunks {
			if b.Chunk < 0 {
				fmt.Fprintf(w, "  container: %s\n", b.Error)
			} else {
				fmt.Fprintf(w, "  chunk %d: %s\n", b.Chunk, b.Error)
			}
		}
	}
	if len(r.BadChunks) > 0 {
		return errors.New("container is corrupted")
	}
	return nil
}

// optFloat prints a value that may be absent.
func optFloat(f *float64) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("%g", *f)
}
