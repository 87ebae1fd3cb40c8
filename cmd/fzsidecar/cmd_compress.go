package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/progress"
)

func init() {
	register(&command{name: "compress", summary: "compress a raw field into an .fz container", run: runCompress})
	register(&command{name: "decompress", summary: "decompress an .fz container to raw little-endian values", run: runDecompress})
}

// progressOver is the input size above which a progress bar is drawn.
const progressOver = 64 << 20

func runCompress(ctx context.Context, args []string) error {
	fs := newFlags("compress", "compress --dtype f32 --dims 100x500x500 [--mode rel] --eb 1e-3 [--fill V] [--backend auto|cpu|gpu] [--format-version 1|2] [--tiling boxes|flat|auto|padded] -o OUT.fz IN")
	var ff fieldFlags
	ff.register(fs)
	eb := fs.String("eb", "", "error bound (absolute, or relative to the value range with --mode rel) (required)")
	out := fs.String("o", "", "output file (required; - for standard output)")
	be := fs.String("backend", "auto", "codec backend: auto, cpu or gpu")
	workers := fs.Int("workers", 0, "CPU worker count (default: all cores)")
	version := formatVersionFlag(fs)
	tiling := tilingFlag(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(fs, "expected one input file, got %d", len(pos))
	}
	if *out == "" {
		return usageErr(fs, "missing -o OUT.fz")
	}
	bounds, err := parseBounds(fs, *eb)
	if err != nil {
		return err
	}
	if len(bounds) != 1 {
		return usageErr(fs, "--eb takes one bound here")
	}
	p, err := ff.params(fs, bounds[0])
	if err != nil {
		return err
	}
	opts, bname, err := selectBackend(*be)
	if err != nil {
		return err
	}
	in, err := openInput(pos[0])
	if err != nil {
		return err
	}
	defer in.Close()
	if err := p.Validate(int64(len(in.data))); err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	warnSuspectFill(os.Stderr, pos[0], in.data, p)
	opts = append(opts, fz.WithWorkers(*workers), fz.WithFormatVersion(*version), fz.WithTiling(*tiling))
	bar, opts := withProgress("compress", uint64(len(in.data)), opts)
	blob, st, err := fz.Compress(ctx, in.data, p, opts...)
	bar.Done()
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	warnExpansion(os.Stderr, pos[0], in.data, p, st)
	if err := writeAtomic(*out, writeBytes(blob)); err != nil {
		return err
	}
	slog.Debug("compressed", "backend", bname)
	tiles := "boxes"
	if h, err := fz.ReadHeader(blob); err == nil {
		tiles = tilingName(h)
	}
	fmt.Fprintf(os.Stderr, "%s: %d -> %d bytes, ratio %.3f, abs eb %s, max error %s, %d raw values, backend %s, %s tiles, format version %d\n",
		pos[0], st.RawBytes, st.CompressedBytes, st.Ratio(), strconv.FormatFloat(st.AbsEB, 'g', 6, 64),
		strconv.FormatFloat(st.MaxAbsErr, 'g', 6, 64), st.Outliers, bname, tiles, *version)
	return nil
}

func runDecompress(ctx context.Context, args []string) error {
	fs := newFlags("decompress", "decompress [--backend auto|cpu|gpu] -o OUT IN.fz   (OUT: raw little-endian values; - for standard output)")
	out := fs.String("o", "", "output file, raw little-endian values (required; - for standard output)")
	be := fs.String("backend", "auto", "codec backend: auto, cpu or gpu")
	workers := fs.Int("workers", 0, "CPU worker count (default: all cores)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(fs, "expected one input .fz file, got %d", len(pos))
	}
	if *out == "" {
		return usageErr(fs, "missing -o OUT")
	}
	opts, _, err := selectBackend(*be)
	if err != nil {
		return err
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
	opts = append(opts, fz.WithWorkers(*workers))
	bar, opts := withProgress("decompress", h.RawSize(), opts)
	_, raw, err := fz.Decompress(ctx, in.data, opts...)
	bar.Done()
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	return writeAtomic(*out, writeBytes(raw))
}

// withProgress adds a progress bar on stderr for work over progressOver
// bytes; the bar draws only on a terminal. A nil bar is valid.
func withProgress(label string, total uint64, opts []fz.Option) (*progress.Bar, []fz.Option) {
	if total <= progressOver {
		return nil, opts
	}
	bar := progress.New(os.Stderr, label, int64(total))
	var last uint64
	return bar, append(opts, fz.WithProgress(func(done, _ uint64) { bar.Add(int64(done - last)); last = done }))
}
