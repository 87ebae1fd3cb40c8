package main

/*
#include "cgo.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/retrieve"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// openStore is one fz_store handle. Calls hold inflight while they use the
// sink, so fz_store_close can wait for them before closing it.
type openStore struct {
	sink     sinks.Sink
	inflight sync.WaitGroup
}

// stores maps handles (never 0, never reused) to open stores.
var stores = struct {
	sync.Mutex
	next uint64
	m    map[uint64]*openStore
}{m: map[uint64]*openStore{}}

// useStore looks up h and marks a call in flight; the caller must call done.
func useStore(h C.fz_store) (s *openStore, done func(), err error) {
	stores.Lock()
	defer stores.Unlock()
	s = stores.m[uint64(h)]
	if s == nil {
		return nil, nil, notOpen(h)
	}
	s.inflight.Add(1)
	return s, s.inflight.Done, nil
}

func notOpen(h C.fz_store) error {
	return invalid("store handle %d is not open (closed already, or never returned by fz_store_open)", uint64(h))
}

func goString(p *C.fzgo_cchar, what string) (string, error) {
	if p == nil {
		return "", invalid("%s is NULL", what)
	}
	return C.GoString((*C.char)(unsafe.Pointer(p))), nil
}

// optString is like goString, but NULL is "".
func optString(p *C.fzgo_cchar) string {
	if p == nil {
		return ""
	}
	return C.GoString((*C.char)(unsafe.Pointer(p)))
}

func keyOf(run, v *C.fzgo_cchar, step C.uint64_t) (sinks.Key, error) {
	r, err := goString(run, "run")
	if err != nil {
		return sinks.Key{}, err
	}
	n, err := goString(v, "var")
	if err != nil {
		return sinks.Key{}, err
	}
	k := sinks.Key{Run: r, Var: n, Step: uint64(step)}
	if err := k.Validate(); err != nil {
		return k, invalid("%w", err)
	}
	return k, nil
}

//export fz_store_open
func fz_store_open(url *C.fzgo_cchar, store *C.fz_store) C.fz_status {
	return call(func() error {
		if store == nil {
			return invalid("fz_store_open: store must not be NULL")
		}
		*store = 0
		u, err := goString(url, "url")
		if err != nil {
			return err
		}
		if strings.TrimSpace(u) == "" {
			return invalid("empty store URL: expected file:///path, a directory path, or s3://bucket/prefix")
		}
		// Warnings (retries, skipped objects) go to libfz's logger: discarded
		// unless FZ_LIBFZ_LOG asks for them (log.go).
		s, err := sinks.Open(context.Background(), u, sinks.WithLogger(logger))
		if err != nil {
			return fmt.Errorf("opening store %q: %w", u, err)
		}
		// As the CLI's ls/get: a reader's missing directory is a wrong path
		// (a typo, not serve's sink), not an empty store.
		if root, local := strings.CutPrefix(s.String(), "file://"); local {
			if _, err := os.Stat(filepath.FromSlash(root)); errors.Is(err, fs.ErrNotExist) {
				s.Close()
				return fmt.Errorf("opening store %q: directory %s does not exist: expected the sink fzsidecar serve writes to", u, filepath.FromSlash(root))
			}
		}
		stores.Lock()
		stores.next++
		h := stores.next
		stores.m[h] = &openStore{sink: s}
		stores.Unlock()
		*store = C.fz_store(h)
		return nil
	})
}

//export fz_store_close
func fz_store_close(store C.fz_store) C.fz_status {
	return call(func() error {
		stores.Lock()
		s := stores.m[uint64(store)]
		delete(stores.m, uint64(store))
		stores.Unlock()
		if s == nil {
			return notOpen(store)
		}
		s.inflight.Wait()
		return s.sink.Close()
	})
}

// list returns the catalog under run and var ("" for all), or a
// *sinks.NotFoundError when a named run or variable has no entries.
func list(ctx context.Context, s sinks.Sink, run, v string) ([]sinks.Entry, error) {
	if run == "" && v != "" {
		return nil, invalid("variable %q given without a run", v)
	}
	if run != "" {
		if err := sinks.ValidateName("run", run); err != nil {
			return nil, invalid("%w", err)
		}
	}
	if v != "" {
		if err := sinks.ValidateName("variable", v); err != nil {
			return nil, invalid("%w", err)
		}
	}
	es, err := s.List(ctx, sinks.Filter{Run: run, Var: v})
	if err != nil {
		return nil, err
	}
	if len(es) == 0 && run != "" {
		// Latest reports which level is missing and what exists there.
		if _, err := sinks.Latest(ctx, s, run, v); err != nil {
			return nil, err
		}
	}
	return es, nil
}

// names returns the distinct names of sorted entries.
func names(es []sinks.Entry, name func(sinks.Entry) string) []string {
	var out []string
	for _, e := range es {
		if n := name(e); len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

func returnNames(ns []string, out **C.char, count *C.uint64_t) {
	*out = (*C.char)(cmalloc(append([]byte(strings.Join(ns, "\n")), 0)))
	*count = C.uint64_t(len(ns))
}

//export fz_store_runs
func fz_store_runs(store C.fz_store, out **C.char, count *C.uint64_t) C.fz_status {
	return call(func() error {
		if out == nil || count == nil {
			return invalid("fz_store_runs: names and count must not be NULL")
		}
		*out, *count = nil, 0
		s, done, err := useStore(store)
		if err != nil {
			return err
		}
		defer done()
		es, err := list(context.Background(), s.sink, "", "")
		if err != nil {
			return err
		}
		// Entries are sorted by run, so equal runs are adjacent.
		returnNames(names(es, func(e sinks.Entry) string { return e.Key.Run }), out, count)
		return nil
	})
}

//export fz_store_vars
func fz_store_vars(store C.fz_store, run *C.fzgo_cchar, out **C.char, count *C.uint64_t) C.fz_status {
	return call(func() error {
		if out == nil || count == nil {
			return invalid("fz_store_vars: names and count must not be NULL")
		}
		*out, *count = nil, 0
		r, err := goString(run, "run")
		if err != nil {
			return err
		}
		if r == "" {
			// list would give every run's variables, mixed: never what
			// "the variables of run X" means.
			return invalid("fz_store_vars: run is empty: expected a run name (fz_store_runs lists them; fz_store_list_json with no run gives every run's variables)")
		}
		s, done, err := useStore(store)
		if err != nil {
			return err
		}
		defer done()
		es, err := list(context.Background(), s.sink, r, "")
		if err != nil {
			return err
		}
		returnNames(names(es, func(e sinks.Entry) string { return e.Key.Var }), out, count)
		return nil
	})
}

//export fz_store_steps
func fz_store_steps(store C.fz_store, run, v *C.fzgo_cchar, out **C.uint64_t, count *C.uint64_t) C.fz_status {
	return call(func() error {
		if out == nil || count == nil {
			return invalid("fz_store_steps: steps and count must not be NULL")
		}
		*out, *count = nil, 0
		r, err := goString(run, "run")
		if err != nil {
			return err
		}
		n, err := goString(v, "var")
		if err != nil {
			return err
		}
		s, done, err := useStore(store)
		if err != nil {
			return err
		}
		defer done()
		es, err := list(context.Background(), s.sink, r, n)
		if err != nil {
			return err
		}
		p := C.malloc(C.size_t(max(len(es), 1) * 8))
		if p == nil {
			panic("malloc failed")
		}
		steps := unsafe.Slice((*uint64)(p), max(len(es), 1))
		for i, e := range es {
			steps[i] = e.Key.Step
		}
		*out, *count = (*C.uint64_t)(p), C.uint64_t(len(es))
		return nil
	})
}

// jsonEntry is one row of fz_store_list_json.
type jsonEntry struct {
	Run       string   `json:"run"`
	Var       string   `json:"var"`
	Step      uint64   `json:"step"`
	DType     string   `json:"dtype"`
	Dims      []uint64 `json:"dims"`
	Mode      string   `json:"mode"`
	Bound     float64  `json:"bound"`
	AbsEB     float64  `json:"abs_eb"`
	MaxAbsErr float64  `json:"max_abs_err"`
	RawBytes  uint64   `json:"raw_bytes"`
	Stored    uint64   `json:"stored_bytes"`
	CRC32C    string   `json:"crc32c"` // 8 hex digits, as ls --json and restore.json print it
	Created   string   `json:"created,omitempty"`
	Ratio     float64  `json:"ratio"`
}

//export fz_store_list_json
func fz_store_list_json(store C.fz_store, run, v *C.fzgo_cchar, out **C.char) C.fz_status {
	return call(func() error {
		if out == nil {
			return invalid("fz_store_list_json: json must not be NULL")
		}
		*out = nil
		s, done, err := useStore(store)
		if err != nil {
			return err
		}
		defer done()
		es, err := list(context.Background(), s.sink, optString(run), optString(v))
		if err != nil {
			return err
		}
		rows := make([]jsonEntry, len(es))
		for i, e := range es {
			m := e.Meta
			rows[i] = jsonEntry{Run: e.Key.Run, Var: e.Key.Var, Step: e.Key.Step, DType: m.DType, Dims: m.Dims,
				Mode: m.Mode, Bound: m.Bound, AbsEB: m.AbsEB, MaxAbsErr: m.MaxAbsErr, RawBytes: m.RawBytes,
				Stored: m.Stored, CRC32C: fmt.Sprintf("%08x", m.CRC32C), Ratio: m.Ratio()}
			if rows[i].Dims == nil {
				rows[i].Dims = []uint64{}
			}
			if !m.Created.IsZero() {
				rows[i].Created = m.Created.UTC().Format(time.RFC3339Nano)
			}
		}
		b, err := json.Marshal(rows)
		if err != nil {
			return err
		}
		*out = (*C.char)(cmalloc(append(b, 0)))
		return nil
	})
}

// statHeader returns k's catalog entry and its container's header, read
// without the chunks.
func statHeader(ctx context.Context, s sinks.Sink, k sinks.Key) (sinks.Meta, *fz.Header, error) {
	m, err := s.Stat(ctx, k)
	if err != nil {
		return m, nil, err
	}
	h, err := retrieve.ReadHeader(ctx, s, k)
	return m, h, err
}

func fillEntry(e *C.fz_entry, h *fz.Header, m sinks.Meta) {
	*e = C.fz_entry{}
	fillInfo(&e.info, h)
	e.max_abs_err = C.double(m.MaxAbsErr)
	e.stored_bytes = C.uint64_t(m.Stored)
	e.crc32c = C.uint32_t(m.CRC32C)
	if !m.Created.IsZero() {
		e.created_unix_ns = C.int64_t(m.Created.UnixNano())
	}
}

//export fz_store_stat
func fz_store_stat(store C.fz_store, run, v *C.fzgo_cchar, step C.uint64_t, entry *C.fz_entry) C.fz_status {
	return call(func() error {
		if entry == nil {
			return invalid("fz_store_stat: entry must not be NULL")
		}
		*entry = C.fz_entry{}
		k, err := keyOf(run, v, step)
		if err != nil {
			return err
		}
		s, done, err := useStore(store)
		if err != nil {
			return err
		}
		defer done()
		ctx := context.Background()
		m, h, err := statHeader(ctx, s.sink, k)
		if err != nil {
			return err
		}
		fillEntry(entry, h, m)
		return nil
	})
}

//export fz_store_read
func fz_store_read(store C.fz_store, run, v *C.fzgo_cchar, step C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t, entry *C.fz_entry) C.fz_status {
	return call(func() error {
		if entry != nil {
			*entry = C.fz_entry{}
		}
		k, err := keyOf(run, v, step)
		if err != nil {
			return err
		}
		s, done, err := useStore(store)
		if err != nil {
			return err
		}
		defer done()
		ctx := context.Background()
		blob, m, err := s.sink.Get(ctx, k) // checks the blob's CRC32C
		if err != nil {
			return err
		}
		h, _, err := headerOf(blob)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", k, s.sink, err)
		}
		if uint64(dstLen) != h.RawSize() {
			return sizeErr("destination is %d bytes, %s (%s %s) needs %d", uint64(dstLen), k, h.DType, fz.FormatDims(h.Dims), h.RawSize())
		}
		if m.RawBytes > 0 && m.RawBytes != h.RawSize() {
			return fmt.Errorf("%s in %s: header says %d raw bytes, its catalog entry %d: %w", k, s.sink, h.RawSize(), m.RawBytes, fz.ErrFormat)
		}
		d, err := cbytes(dst, dstLen, "dst")
		if err != nil {
			return err
		}
		if _, err := fz.DecompressTo(ctx, blob, d, fz.WithBackend(fz.CPU())); err != nil {
			return fmt.Errorf("decoding %s from %s: %w", k, s.sink, err)
		}
		if entry != nil {
			fillEntry(entry, h, m)
		}
		return nil
	})
}

//export fz_store_read_region
func fz_store_read_region(store C.fz_store, run, v *C.fzgo_cchar, step C.uint64_t, lo, hi C.uint64_t,
	dst unsafe.Pointer, dstLen C.uint64_t, entry *C.fz_entry) C.fz_status {
	return call(func() error {
		if entry != nil {
			*entry = C.fz_entry{}
		}
		k, err := keyOf(run, v, step)
		if err != nil {
			return err
		}
		s, done, err := useStore(store)
		if err != nil {
			return err
		}
		defer done()
		ctx := context.Background()
		m, h, err := statHeader(ctx, s.sink, k)
		if err != nil {
			return err
		}
		n, err := regionBytes(h, uint64(lo), uint64(hi))
		if err != nil {
			return err
		}
		d, err := dstBytes(dst, dstLen, n, fmt.Sprintf("region %d:%d of %s", uint64(lo), uint64(hi), k))
		if err != nil {
			return err
		}
		_, raw, err := retrieve.FetchRegion(ctx, s.sink, k, fz.Region{Lo: uint64(lo), Hi: uint64(hi)})
		if err != nil {
			return err
		}
		if uint64(len(raw)) != n {
			return fmt.Errorf("%s region %d:%d decoded to %d bytes, expected %d: %w", k, uint64(lo), uint64(hi), len(raw), n, fz.ErrFormat)
		}
		copy(d, raw)
		if entry != nil {
			fillEntry(entry, h, m)
		}
		return nil
	})
}
