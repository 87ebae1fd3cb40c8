package retrieve

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// field returns a smooth f32 field of dims and its raw bytes.
func field(dims []uint64, phase float64) []byte {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	b := make([]byte, 4*n)
	for i := range n {
		v := float32(math.Sin(float64(i)*0.01+phase) * 100)
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func compress(t *testing.T, raw []byte, dims []uint64, opts ...fz.Option) []byte {
	t.Helper()
	blob, _, err := fz.Compress(context.Background(), raw, fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Abs, Bound: 0.01}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return blob
}

func openSink(t *testing.T) (sinks.Sink, string) {
	dir := t.TempDir()
	s, err := sinks.Open(context.Background(), dir, sinks.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func put(t *testing.T, s sinks.Sink, k sinks.Key, blob []byte) {
	t.Helper()
	h, err := fz.ReadHeader(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), k, blob, MetaOf(h)); err != nil {
		t.Fatal(err)
	}
}

func TestReadChunk(t *testing.T) {
	ctx := context.Background()
	s, dir := openSink(t)
	dims := []uint64{8, 64, 64}
	blob := compress(t, field(dims, 0), dims, fz.WithTilesPerChunk(1))
	k := sinks.Key{Run: "r", Var: "v", Step: 1}
	put(t, s, k, blob)
	full, _ := fz.ReadHeader(blob)
	if len(full.Chunks) < 3 {
		t.Fatalf("fixture has %d chunks, want several", len(full.Chunks))
	}
	h, err := ReadHeader(ctx, s, k)
	if err != nil {
		t.Fatal(err)
	}
	if h.HeaderSize != full.HeaderSize || len(h.Chunks) != len(full.Chunks) {
		t.Fatalf("ranged header differs: %+v", h)
	}
	for i, c := range full.Chunks {
		_, b, err := ReadChunk(ctx, s, k, i)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if !bytes.Equal(b, blob[c.Offset:c.Offset+c.Size]) {
			t.Fatalf("chunk %d bytes differ", i)
		}
	}
	if _, _, err := ReadChunk(ctx, s, k, len(full.Chunks)); err == nil {
		t.Error("chunk past the end accepted")
	}
	// Corrupt chunk 1 on disk: its ranged read fails its CRC, chunk 0 still
	// reads, and a whole Get fails the blob CRC.
	p := filepath.Join(dir, "r", "v", "000000000001.fz")
	bad := bytes.Clone(blob)
	bad[full.Chunks[1].Offset+3] ^= 0xff
	os.WriteFile(p, bad, 0o644)
	if _, _, err := ReadChunk(ctx, s, k, 1); !errors.Is(err, sinks.ErrChecksum) {
		t.Fatalf("corrupt chunk: %v", err)
	}
	if _, _, err := ReadChunk(ctx, s, k, 0); err != nil {
		t.Fatalf("intact chunk 0 of a damaged object: %v", err)
	}
	if _, _, _, err := Fetch(ctx, s, k); !errors.Is(err, sinks.ErrChecksum) {
		t.Fatalf("Fetch of a corrupt object: %v", err)
	}
	// A corrupt header is caught by the header CRC.
	bad = bytes.Clone(blob)
	bad[40] ^= 1
	os.WriteFile(p, bad, 0o644)
	if _, err := ReadHeader(ctx, s, k); !errors.Is(err, fz.ErrFormat) {
		t.Fatalf("corrupt header: %v", err)
	}
}

func TestRestore(t *testing.T) {
	ctx := context.Background()
	s, _ := openSink(t)
	dims := []uint64{4, 32, 32}
	raws := map[string][]byte{}
	for i, v := range []string{"pres", "temp", "vel"} {
		raws[v] = field(dims, float64(i))
		put(t, s, sinks.Key{Run: "r", Var: v, Step: 5}, compress(t, raws[v], dims))
		put(t, s, sinks.Key{Run: "r", Var: v, Step: 4}, compress(t, field(dims, 9), dims))
	}
	out := filepath.Join(t.TempDir(), "shm", "r")
	// A stale manifest from an earlier restore must not survive a new one.
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, ManifestName), []byte("stale"), 0o644)
	man, err := Restore(ctx, s, "r", 5, out, RestoreOptions{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Vars) != 3 {
		t.Fatalf("restored %d vars", len(man.Vars))
	}
	var onDisk Manifest
	b, _ := os.ReadFile(filepath.Join(out, ManifestName))
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.Step != 5 || len(onDisk.Vars) != 3 {
		t.Fatalf("manifest: %v %s", err, b)
	}
	for v, raw := range raws {
		got, err := os.ReadFile(filepath.Join(out, v+".raw"))
		if err != nil || len(got) != len(raw) {
			t.Fatalf("%s: %v (%d bytes)", v, err, len(got))
		}
		for i := 0; i < len(raw); i += 4 {
			a := math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))
			b := math.Float32frombits(binary.LittleEndian.Uint32(got[i:]))
			if math.Abs(float64(a-b)) > 0.01 {
				t.Fatalf("%s value %d: %v restored as %v, bound 0.01", v, i/4, a, b)
			}
		}
	}
	if _, err := Restore(ctx, s, "r", 6, out, RestoreOptions{}); !errors.Is(err, sinks.ErrNotFound) {
		t.Fatalf("restore of a missing step: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, ManifestName)); err != nil {
		t.Errorf("a failed lookup removed the previous complete restore's manifest: %v", err)
	}
	// One corrupt variable fails the whole restore, naming the object, and
	// leaves no manifest: the directory does not look complete.
	root := s.String()[len("file://"):]
	p := filepath.Join(root, "r", "temp", "000000000004.fz")
	blob, _ := os.ReadFile(p)
	blob[len(blob)-1] ^= 1
	os.WriteFile(p, blob, 0o644)
	_, err = Restore(ctx, s, "r", 4, out, RestoreOptions{Jobs: 3})
	var ce *sinks.ChecksumError
	if !errors.As(err, &ce) || ce.Object != p {
		t.Fatalf("restore with a corrupt variable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed restore left a manifest: %v", err)
	}
}

// restore.json records each variable's fill value (NaN and infinities as
// strings, so the manifest stays valid JSON) and the blob's CRC32C as the
// same 8 hex digits the sink and ls print.
func TestRestoreManifestFillAndCRC(t *testing.T) {
	ctx := context.Background()
	s, _ := openSink(t)
	dims := []uint64{4, 32, 32}
	fills := map[string]float64{"pres": -1e34, "temp": math.NaN(), "vel": math.Inf(-1)}
	for v, f := range fills {
		raw := field(dims, 1)
		binary.LittleEndian.PutUint32(raw[40:], math.Float32bits(float32(f)))
		fc := f
		blob, _, err := fz.Compress(ctx, raw, fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Abs, Bound: 0.01, Fill: &fc})
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, sinks.Key{Run: "r", Var: v, Step: 1}, blob)
	}
	put(t, s, sinks.Key{Run: "r", Var: "nofill", Step: 1}, compress(t, field(dims, 2), dims))
	out := t.TempDir()
	if _, err := Restore(ctx, s, "r", 1, out, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Vars []map[string]any `json:"vars"`
	}
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatalf("restore.json is not valid JSON: %v\n%s", err, b)
	}
	want := map[string]any{"pres": -1e34, "temp": "nan", "vel": "-inf"}
	es, _ := s.List(ctx, sinks.Filter{Run: "r"})
	crcs := map[string]string{}
	for _, e := range es {
		crcs[e.Key.Var] = fmt.Sprintf("%08x", e.Meta.CRC32C)
	}
	for _, v := range generic.Vars {
		name := v["var"].(string)
		if got, ok := v["fill"]; want[name] != got || (name == "nofill") == ok {
			t.Errorf("%s: fill %v (present %v), want %v", name, got, ok, want[name])
		}
		if v["crc32c"] != crcs[name] {
			t.Errorf("%s: crc32c %v, want %q as ls prints it", name, v["crc32c"], crcs[name])
		}
	}
	var man Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	for _, r := range man.Vars {
		f := fills[r.Var]
		switch {
		case r.Var == "nofill":
			if r.Fill != nil {
				t.Errorf("nofill: fill %v", *r.Fill)
			}
		case r.Fill == nil:
			t.Errorf("%s: no fill after a round trip", r.Var)
		case math.IsNaN(f) != math.IsNaN(float64(*r.Fill)) || !math.IsNaN(f) && float32(*r.Fill) != float32(f):
			t.Errorf("%s: fill %v read back, want %v", r.Var, *r.Fill, f)
		}
	}
}
