package pipeline_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/pipeline"
)

// dirStore is a minimal real local-directory sink: create-only, idempotent,
// durable (fsync + rename). It journals every Put so tests can see retries.
type dirStore struct {
	dir   string
	delay time.Duration
	gate  chan struct{} // if non-nil, Put waits for it to be closed
	mu    sync.Mutex
	// cur and peak count Puts running at once.
	cur, peak atomic.Int32
}

func (s *dirStore) path(k pipeline.Key) string {
	return filepath.Join(s.dir, filepath.FromSlash(k.String()))
}

func (s *dirStore) Put(ctx context.Context, k pipeline.Key, blob []byte, _ pipeline.Meta) error {
	n := s.cur.Add(1)
	defer s.cur.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(k)
	if old, err := os.ReadFile(p); err == nil {
		s.journal("same", k)
		if bytes.Equal(old, blob) {
			return nil
		}
		return fmt.Errorf("%s: %w", k, pipeline.ErrConflict)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(blob); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if err := os.Link(tmp, p); err != nil { // create-only, atomic
		os.Remove(tmp)
		return err
	}
	os.Remove(tmp)
	s.journal("created", k)
	return nil
}

func (s *dirStore) journal(what string, k pipeline.Key) {
	f, err := os.OpenFile(filepath.Join(s.dir, "journal"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%s %s\n", what, k)
		f.Sync()
		f.Close()
	}
}

func readJournal(dir string) (created, same map[string]int) {
	created, same = map[string]int{}, map[string]int{}
	b, _ := os.ReadFile(filepath.Join(dir, "journal"))
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if what, key, ok := strings.Cut(l, " "); ok {
			if what == "created" {
				created[key]++
			} else {
				same[key]++
			}
		}
	}
	return created, same
}

// realFZ reports whether the fz codec is implemented yet; until it is, the
// tests use a lossless flate codec so ingest can be tested on its own.
func realFZ() bool {
	_, _, err := fz.Compress(context.Background(), make([]byte, 64), fz.Params{DType: fz.Float32, Dims: []uint64{16}, Mode: fz.Abs, Bound: 1e-3})
	return err == nil
}

func testCodec() pipeline.Codec {
	if realFZ() {
		return pipeline.FZ()
	}
	return flateCodec
}

func flateCodec(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error) {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestSpeed)
	w.Write(src)
	w.Close()
	return b.Bytes(), fz.Stats{RawBytes: uint64(len(src)), CompressedBytes: uint64(b.Len())}, nil
}

// decodeCheck verifies a stored blob against the original raw bytes: exact
// for flate, within the error bound for fz.
func decodeCheck(blob, raw []byte, p fz.Params) error {
	if !realFZ() {
		out, err := io.ReadAll(flate.NewReader(bytes.NewReader(blob)))
		if err != nil {
			return err
		}
		if !bytes.Equal(out, raw) {
			return errors.New("decompressed bytes differ from the original")
		}
		return nil
	}
	h, out, err := fz.Decompress(context.Background(), blob)
	if err != nil {
		return err
	}
	if len(out) != len(raw) {
		return fmt.Errorf("decompressed %d bytes, want %d", len(out), len(raw))
	}
	eb := h.AbsEB * (1 + 1e-6)
	for i := 0; i < len(raw); i += p.DType.Size() {
		var a, b float64
		if p.DType == fz.Float32 {
			a = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
			b = float64(math.Float32frombits(binary.LittleEndian.Uint32(out[i:])))
		} else {
			a = math.Float64frombits(binary.LittleEndian.Uint64(raw[i:]))
			b = math.Float64frombits(binary.LittleEndian.Uint64(out[i:]))
		}
		if math.Abs(a-b) > eb {
			return fmt.Errorf("element %d: %g vs %g exceeds bound %g", i/p.DType.Size(), a, b, h.AbsEB)
		}
	}
	return nil
}

// field fills a smooth, step-dependent field into v (what a simulation would
// write in place).
func fillField(v []float32, seed, step int) {
	for i := range v {
		x := float64(i) / float64(len(v))
		v[i] = float32(math.Sin(2*math.Pi*(3*x+0.1*float64(step))) + 0.01*float64(seed))
	}
}

func fillField64(v []float64, seed, step int) {
	for i := range v {
		x := float64(i) / float64(len(v))
		v[i] = math.Cos(2*math.Pi*(2*x-0.05*float64(step))) * float64(1+seed)
	}
}
