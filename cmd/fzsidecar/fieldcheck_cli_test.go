package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// temperatureField writes a smooth f32 field in [250, 310] with every 5th
// value set to fill (nil: none) and returns its path.
func temperatureField(t *testing.T, dir string, n int, fill *float32) string {
	t.Helper()
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(280 + 30*math.Sin(float64(i)/40))
		if fill != nil && i%5 == 0 {
			v[i] = *fill
		}
	}
	path := filepath.Join(dir, "temp.f32")
	if err := os.WriteFile(path, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// refixChecksums recomputes chunk and index checksums after a payload edit.
func refixChecksums(t *testing.T, b []byte) {
	t.Helper()
	h, err := fz.ReadHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	io := int(h.IndexOffset())
	for i, c := range h.Chunks {
		binary.LittleEndian.PutUint32(b[io+24*i+16:], fz.CRC32C(b[c.Offset:c.Offset+c.Size]))
	}
	ie := io + 24*len(h.Chunks)
	binary.LittleEndian.PutUint32(b[ie:], fz.CRC32C(b[io:ie]))
}

// TestInspectHostileContainers (issue #27.7): a range with one NaN end is
// refused with a message, not a panic; NaN and ±Inf fill values print as
// JSON; a tile broken behind valid checksums is found by inspect as by
// decompress, unless --no-decode.
func TestInspectHostileContainers(t *testing.T) {
	dir := t.TempDir()
	in := temperatureField(t, dir, 6000, nil)
	fzf := filepath.Join(dir, "t.fz")
	if _, stderr, code := run(t, "compress", "--dtype", "f32", "--dims", "6000", "--eb", "1e-3", "-o", fzf, in); code != 0 {
		t.Fatalf("compress: %s", stderr)
	}
	blob, _ := os.ReadFile(fzf)

	// One NaN end of the range.
	b := append([]byte(nil), blob...)
	binary.LittleEndian.PutUint64(b[72:], 0x7FF8000000000000)
	hs := 88 + 8*int(b[10])
	binary.LittleEndian.PutUint32(b[hs:], fz.CRC32C(b[:hs]))
	nanEnd := filepath.Join(dir, "nanend.fz")
	os.WriteFile(nanEnd, b, 0o644)
	for _, args := range [][]string{{"inspect", nanEnd}, {"inspect", "--json", nanEnd}} {
		_, stderr, code := run(t, args...)
		if code == 0 || code == 2 && strings.Contains(stderr, "goroutine") || !strings.Contains(stderr, "range_max") {
			t.Fatalf("%v: exit %d, stderr %q: want a clear refusal naming range_max", args, code, stderr)
		}
	}

	// NaN and infinite fill values in --json.
	for _, fill := range []string{"nan", "inf", "-inf"} {
		f := filepath.Join(dir, "fill-"+fill+".fz")
		if _, stderr, code := run(t, "compress", "--dtype", "f32", "--dims", "6000", "--eb", "1e-3", "--fill", fill, "-o", f, in); code != 0 {
			t.Fatalf("compress --fill %s: %s", fill, stderr)
		}
		stdout, stderr, code := run(t, "inspect", "--json", f)
		var rep map[string]any
		if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep["fill"] != fill || rep["fill_bits"] == nil {
			t.Fatalf("inspect --json with fill %s: exit %d, %s %s", fill, code, stdout, stderr)
		}
		// One hex digit per 4 bits of the dtype: float32 NaN is 0x7fc00000.
		if want := map[string]string{"nan": "0x7fc00000", "inf": "0x7f800000", "-inf": "0xff800000"}[fill]; rep["fill_bits"] != want {
			t.Fatalf("inspect --json with fill %s: fill_bits %v, want %s", fill, rep["fill_bits"], want)
		}
		if stdout, _, code := run(t, "inspect", f); code != 0 || !strings.Contains(stdout, "fill value") {
			t.Fatalf("inspect with fill %s: exit %d\n%s", fill, code, stdout)
		}
	}

	// A tile with unknown word0 bits behind valid checksums.
	b = append([]byte(nil), blob...)
	h, _ := fz.ReadHeader(b)
	g, _ := h.Geometry()
	first, end := g.ChunkTiles(0)
	b[h.Chunks[0].Offset+4*(end-first)+3] |= 0x80
	refixChecksums(t, b)
	broken := filepath.Join(dir, "broken.fz")
	os.WriteFile(broken, b, 0o644)
	if _, _, err := fz.Decompress(context.Background(), b); err == nil {
		t.Fatal("the broken tile decodes: the test lost its teeth")
	}
	stdout, _, code := run(t, "inspect", broken)
	if code == 0 || !strings.Contains(stdout, "chunk 0, tile 0") || !strings.Contains(stdout, "chunk checksums  ok") {
		t.Fatalf("inspect of a broken tile: exit %d\n%s", code, stdout)
	}
	stdout, _, code = run(t, "inspect", "--json", broken)
	var rep map[string]any
	if code == 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep["decode"] != "failed" {
		t.Fatalf("inspect --json of a broken tile: exit %d\n%s", code, stdout)
	}
	stdout, _, code = run(t, "inspect", "--no-decode", broken)
	if code != 0 || !strings.Contains(stdout, "not decoded") {
		t.Fatalf("inspect --no-decode: exit %d\n%s", code, stdout)
	}
	stdout, _, code = run(t, "inspect", fzf)
	if code != 0 || !strings.Contains(stdout, "decode           ok") {
		t.Fatalf("inspect of a good container: exit %d\n%s", code, stdout)
	}
}

// TestForgottenFillWarns (issue #27.9): compress and eval warn on stderr
// about a -1e34 that looks like a fill, eval reports the error over the
// other values, and nothing of it reaches compress' stdout.
func TestForgottenFillWarns(t *testing.T) {
	dir := t.TempDir()
	fill := float32(-1e34)
	in := temperatureField(t, dir, 20000, &fill)
	stdout, stderr, code := run(t, "compress", "--dtype", "f32", "--dims", "20000", "--eb", "1e-3", "-o", "-", in)
	if code != 0 || !strings.Contains(stderr, "looks like a fill value") || !strings.Contains(stderr, "--fill -1e+34") {
		t.Fatalf("compress without --fill: exit %d, stderr %q", code, stderr)
	}
	if _, _, err := fz.Decompress(context.Background(), []byte(stdout)); err != nil {
		t.Fatalf("compress -o - wrote more than the container: %v", err)
	}
	_, stderr, code = run(t, "compress", "--dtype", "f32", "--dims", "20000", "--eb", "1e-3", "--fill", "-1e34", "-o", filepath.Join(dir, "ok.fz"), in)
	if code != 0 || strings.Contains(stderr, "fill value") {
		t.Fatalf("compress with --fill: exit %d, stderr %q", code, stderr)
	}

	stdout, stderr, code = run(t, "eval", "--dtype", "f32", "--dims", "20000", "--eb", "1e-2,1e-3", "--json", "--repeat", "1", in)
	if code != 0 || !strings.Contains(stderr, "looks like a fill value") {
		t.Fatalf("eval --json: exit %d, stderr %q", code, stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("eval --json line %q: %v", l, err)
		}
		if m["suspect_fill"] != -1e34 && m["suspect_fill"] != float64(fill) {
			t.Fatalf("eval --json: suspect_fill %v in %s", m["suspect_fill"], l)
		}
		if r, _ := m["max_err_over_eb_without_fill"].(float64); r < 10 || m["max_err_over_eb"].(float64) > 1 {
			t.Fatalf("eval --json: the error over the real values should be far above their bound: %s", l)
		}
	}
	stdout, stderr, code = run(t, "eval", "--dtype", "f32", "--dims", "20000", "--eb", "1e-3", "--repeat", "1", in)
	if code != 0 || !strings.Contains(stderr, "max err/eb over the other values") || strings.Contains(stdout, "fill") {
		t.Fatalf("eval: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	_, stderr, code = run(t, "eval", "--dtype", "f32", "--dims", "20000", "--eb", "1e-3", "--fill", "-1e34", "--repeat", "1", in)
	if code != 0 || strings.Contains(stderr, "fill value") {
		t.Fatalf("eval with --fill: exit %d, stderr %q", code, stderr)
	}
}

// TestTinyAbsBoundWarns (issue #27.9): an abs bound below the data's
// precision makes the output larger than the input: say so.
func TestTinyAbsBoundWarns(t *testing.T) {
	dir := t.TempDir()
	in := temperatureField(t, dir, 20000, nil)
	out := filepath.Join(dir, "big.fz")
	_, stderr, code := run(t, "compress", "--dtype", "f32", "--dims", "20000", "--mode", "abs", "--eb", "1e-10", "-o", out, in)
	if code != 0 || !strings.Contains(stderr, "larger than the input") || !strings.Contains(stderr, "below the data's precision") {
		t.Fatalf("compress --eb 1e-10: exit %d, stderr %q", code, stderr)
	}
	stdout, stderr, code := run(t, "eval", "--dtype", "f32", "--dims", "20000", "--mode", "abs", "--eb", "1e-10", "--json", "--repeat", "1", in)
	if code != 0 || !strings.Contains(stderr, "below the data's precision") || !bytes.HasPrefix([]byte(stdout), []byte("{")) {
		t.Fatalf("eval --eb 1e-10: exit %d\nstdout %s\nstderr %q", code, stdout, stderr)
	}
}
