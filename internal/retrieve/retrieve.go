// Package retrieve joins sinks and the fz codec: it fills sink metadata from
// container headers, fetches and decodes snapshots, reads single chunks with
// ranged reads, and restores every variable of a step into a directory (for
// instance one in /dev/shm that a restarting simulation maps).
//
// The sinks package stays free of the codec; this is where they meet.
package retrieve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/progress"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// MetaOf fills the codec fields of sink metadata from a container header.
func MetaOf(h *fz.Header) sinks.Meta {
	return sinks.Meta{
		DType:    h.DType.String(),
		Dims:     append([]uint64(nil), h.Dims...),
		Mode:     h.Mode.String(),
		Bound:    h.Bound,
		AbsEB:    h.AbsEB,
		RawBytes: h.RawSize(),
	}
}

// Fetch gets k's blob (the sink checks its CRC32C) and decodes it.
func Fetch(ctx context.Context, s sinks.Sink, k sinks.Key, opts ...fz.Option) (*fz.Header, []byte, sinks.Meta, error) {
	blob, m, err := s.Get(ctx, k)
	if err != nil {
		return nil, nil, m, err
	}
	if m.RawBytes > 0 {
		// The catalog's size bounds what decoding may allocate.
		opts = append(opts[:len(opts):len(opts)], fz.WithMaxRawSize(m.RawBytes))
	}
	h, raw, err := fz.Decompress(ctx, blob, opts...)
	if err != nil {
		return nil, nil, m, fmt.Errorf("decoding %s from %s: %w", k, s, err)
	}
	if m.RawBytes > 0 && uint64(len(raw)) != m.RawBytes {
		return nil, nil, m, fmt.Errorf("%s in %s decoded to %d bytes, its catalog entry says %d", k, s, len(raw), m.RawBytes)
	}
	return h, raw, m, nil
}

// maxHeaderBytes bounds a header plus chunk index fetched by ReadHeader
// (a 2^40-element field in 1M-value chunks has an index of 24 MiB).
const maxHeaderBytes = 256 << 20

// ReadHeader fetches only the header and chunk index of k, with two ranged
// reads, and checks them (fz.ReadHeader verifies their CRC32Cs).
func ReadHeader(ctx context.Context, s sinks.Sink, k sinks.Key) (*fz.Header, error) {
	m, err := s.Stat(ctx, k)
	if err != nil {
		return nil, err
	}
	const fixed = 88 // fz's fixed header: enough for PeekHeaderSize
	pre, err := s.ReadRange(ctx, k, 0, min(fixed, int64(m.Stored)))
	if err != nil {
		return nil, err
	}
	need, err := fz.PeekHeaderSize(pre)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", k, s, err)
	}
	if need > m.Stored || need > maxHeaderBytes {
		return nil, fmt.Errorf("%s in %s: header and index claim %d bytes of a %d-byte object: %w", k, s, need, m.Stored, fz.ErrFormat)
	}
	hb, err := s.ReadRange(ctx, k, 0, int64(need))
	if err != nil {
		return nil, err
	}
	h, err := fz.ReadHeader(hb)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", k, s, err)
	}
	if h.CompressedSize() != m.Stored {
		return nil, fmt.Errorf("%s in %s: index says %d bytes, the object has %d: %w", k, s, h.CompressedSize(), m.Stored, fz.ErrFormat)
	}
	return h, nil
}

// ReadChunk fetches chunk i of k without fetching the rest of the object
// and checks it against the CRC32C in the chunk index. It returns the
// chunk's encoded bytes (FetchRegion decodes them).
func ReadChunk(ctx context.Context, s sinks.Sink, k sinks.Key, i int) (*fz.Header, []byte, error) {
	h, err := ReadHeader(ctx, s, k)
	if err != nil {
		return nil, nil, err
	}
	if i < 0 || i >= len(h.Chunks) {
		return nil, nil, fmt.Errorf("chunk %d of %s: the container has chunks 0..%d", i, k, len(h.Chunks)-1)
	}
	c := h.Chunks[i]
	b, err := s.ReadRange(ctx, k, int64(c.Offset), int64(c.Size))
	if err != nil {
		return nil, nil, err
	}
	if got := sinks.CRC32C(b); got != c.CRC {
		return nil, nil, &sinks.ChecksumError{Object: fmt.Sprintf("%s/%s chunk %d", s, k, i), Want: c.CRC, Got: got}
	}
	return h, b, nil
}

// WriteFileAtomic writes data to path through a temp file in the same
// directory and a rename, so readers see the old file or the new one.
func WriteFileAtomic(path string, data []byte, sync bool) error {
	var rb [6]byte
	rand.Read(rb[:])
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-"+hex.EncodeToString(rb[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// Jobs is how many variables are fetched and decoded at once
	// (default 4).
	Jobs int
	// Bar, if set, gets the raw bytes decoded.
	Bar *progress.Bar
	// Sync fsyncs each file (off for /dev/shm, where it means nothing).
	Sync bool
	// Decode options for fz.
	Decode []fz.Option
}

// Restored describes one restored variable in the manifest.
type Restored struct {
	Var   string   `json:"var"`
	File  string   `json:"file"` // relative to the restore directory
	DType string   `json:"dtype"`
	Dims  []uint64 `json:"dims"`
	Bytes uint64   `json:"bytes"`
	// Fill is the field's fill value, if it has one: the elements equal to
	// it are missing values, restored bit for bit.
	Fill *fz.JSONFloat `json:"fill,omitempty"`
	// CRC32C is the stored blob's checksum, as 8 lowercase hex digits like
	// everywhere else (ls, the sink's metadata, error messages).
	CRC32C string `json:"crc32c"`
}

// Manifest is written as restore.json after every variable is in place;
// its presence tells a reader that the restore is complete.
type Manifest struct {
	Sink     string     `json:"sink"`
	Run      string     `json:"run"`
	Step     uint64     `json:"step"`
	Restored time.Time  `json:"restored"`
	Vars     []Restored `json:"vars"`
}

// ManifestName is the file Restore writes last.
const ManifestName = "restore.json"

// TotalRaw sums the decoded sizes of entries (for a progress bar).
func TotalRaw(es []sinks.Entry) int64 {
	var n int64
	for _, e := range es {
		n += int64(e.Meta.RawBytes)
	}
	return n
}

// Restore fetches, checks and decodes every variable of run at step into
// dir/<var>.raw (raw little-endian values, C order), Jobs at a time, then
// writes dir/restore.json. An existing manifest is removed first, so a
// half-done restore never looks complete.
func Restore(ctx context.Context, s sinks.Sink, run string, step uint64, dir string, o RestoreOptions) (*Manifest, error) {
	es, err := sinks.StepEntries(ctx, s, run, step)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("restore directory: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the old manifest: %w", err)
	}
	jobs := o.Jobs
	if jobs < 1 {
		jobs = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]Restored, len(es))
	errs := make([]error, len(es))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			r, err := restoreOne(ctx, s, e.Key, dir, o)
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			out[i] = r
		}()
	}
	wg.Wait()
	// Report the real failure, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Var < out[j].Var })
	man := &Manifest{Sink: s.String(), Run: run, Step: step, Restored: time.Now().UTC(), Vars: out}
	b, _ := json.MarshalIndent(man, "", "  ")
	if err := WriteFileAtomic(filepath.Join(dir, ManifestName), append(b, '\n'), o.Sync); err != nil {
		return nil, err
	}
	return man, nil
}

func restoreOne(ctx context.Context, s sinks.Sink, k sinks.Key, dir string, o RestoreOptions) (Restored, error) {
	var last uint64
	opts := append([]fz.Option{fz.WithProgress(func(done, total uint64) {
		o.Bar.Add(int64(done - last))
		last = done
	})}, o.Decode...)
	h, raw, m, err := Fetch(ctx, s, k, opts...)
	if err != nil {
		return Restored{}, err
	}
	name := k.Var + ".raw"
	if err := WriteFileAtomic(filepath.Join(dir, name), raw, o.Sync); err != nil {
		return Restored{}, err
	}
	r := Restored{Var: k.Var, File: name, DType: h.DType.String(), Dims: h.Dims, Bytes: uint64(len(raw)), CRC32C: fmt.Sprintf("%08x", m.CRC32C)}
	if h.Fill != nil {
		v := *h.Fill
		if h.DType == fz.Float32 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			// The f32 value as a user wrote it (-1e34, not
			// -9.999999790214768e+33); it converts back to the same f32.
			v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
		}
		f := fz.JSONFloat(v)
		r.Fill = &f
	}
	return r, nil
}

// FetchRegion fetches and decodes indices [lo, hi) of the slowest dimension
// of k with ranged reads of the header, the index and only the chunks that
// hold the region.
func FetchRegion(ctx context.Context, s sinks.Sink, k sinks.Key, r fz.Region) (*fz.Header, []byte, error) {
	h, err := ReadHeader(ctx, s, k)
	if err != nil {
		return nil, nil, err
	}
	raw, err := fz.DecodeRegion(ctx, h, r, func(i int) ([]byte, error) {
		c := h.Chunks[i]
		b, err := s.ReadRange(ctx, k, int64(c.Offset), int64(c.Size))
		if err != nil {
			return nil, err
		}
		if got := sinks.CRC32C(b); got != c.CRC {
			return nil, &sinks.ChecksumError{Object: fmt.Sprintf("%s/%s chunk %d", s, k, i), Want: c.CRC, Got: got}
		}
		return b, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s region %d:%d: %w", k, r.Lo, r.Hi, err)
	}
	return h, raw, nil
}
