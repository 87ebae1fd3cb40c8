package main

import (
	"github.com/fzsidecar/fzsidecar/internal/miniotest"

	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/internal/synth"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fzsidecar-cli")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "fzsidecar")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	miniotest.StopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run executes the CLI and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func writeField(t *testing.T, dir string) (string, []float32) {
	v := synth.Smooth(10, 30, 50, 0)
	v[17] = float32(math.NaN())
	v[99] = -1e34
	path := filepath.Join(dir, "field.f32")
	if err := os.WriteFile(path, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, v
}

func TestCompressDecompressInspect(t *testing.T) {
	dir := t.TempDir()
	in, v := writeField(t, dir)
	fzf := filepath.Join(dir, "field.fz")
	// Flags after the positional argument must work too.
	_, stderr, code := run(t, "compress", "--dtype", "f32", "--dims", "10x30x50", "--mode", "rel", "--eb", "1e-3", "--fill", "-1e34", in, "-o", fzf)
	if code != 0 {
		t.Fatalf("compress exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "ratio") || !strings.Contains(stderr, "backend cpu") {
		t.Errorf("compress summary lacks ratio/backend: %q", stderr)
	}
	out := filepath.Join(dir, "back.f32")
	if _, stderr, code := run(t, "decompress", "-o", out, fzf); code != 0 {
		t.Fatalf("decompress exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil || len(raw) != 4*len(v) {
		t.Fatalf("decompressed %d bytes (%v), want %d", len(raw), err, 4*len(v))
	}
	got := unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), len(v))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, x := range v {
		if i != 17 && i != 99 {
			lo, hi = math.Min(lo, float64(x)), math.Max(hi, float64(x))
		}
	}
	eb := 1e-3 * (hi - lo)
	for i, x := range v {
		switch i {
		case 17, 99:
			if math.Float32bits(x) != math.Float32bits(got[i]) {
				t.Fatalf("value %d not bit-exact", i)
			}
		default:
			if math.Abs(float64(x)-float64(got[i])) > eb {
				t.Fatalf("value %d off by %g > %g", i, math.Abs(float64(x)-float64(got[i])), eb)
			}
		}
	}
	// stdout output.
	stdout, _, code := run(t, "decompress", "-o", "-", fzf)
	if code != 0 || stdout != string(raw) {
		t.Fatalf("decompress to stdout: exit %d, %d bytes", code, len(stdout))
	}
	// inspect, text and JSON.
	stdout, _, code = run(t, "inspect", fzf)
	if code != 0 || !strings.Contains(stdout, "chunk checksums  ok") || !strings.Contains(stdout, "10x30x50") {
		t.Fatalf("inspect exit %d:\n%s", code, stdout)
	}
	stdout, _, code = run(t, "inspect", "--json", fzf)
	var rep map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep["chunk_crc"] != "ok" || rep["fill"] == nil {
		t.Fatalf("inspect --json exit %d: %s", code, stdout)
	}
	// A corrupted container: inspect names the chunk and fails.
	blob, _ := os.ReadFile(fzf)
	blob[len(blob)-10] ^= 0xFF
	bad := filepath.Join(dir, "bad.fz")
	os.WriteFile(bad, blob, 0o644)
	stdout, _, code = run(t, "inspect", bad)
	if code == 0 || !strings.Contains(stdout, "chunk 0: checksum mismatch") {
		t.Fatalf("corrupt inspect exit %d:\n%s", code, stdout)
	}
	if _, stderr, code := run(t, "decompress", "-o", filepath.Join(dir, "x"), bad); code == 0 || !strings.Contains(stderr, "checksum mismatch") {
		t.Fatalf("corrupt decompress exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Fatal("a failed decompress left an output file")
	}
}

func TestEvalJSON(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeField(t, dir)
	stdout, stderr, code := run(t, "eval", "--dtype", "f32", "--dims", "10x30x50", "--eb", "1e-2,1e-3", "--fill", "-1e34", "--json", "--repeat", "1", in)
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %d:\n%s", len(lines), stdout)
	}
	keys := []string{"file", "mode", "eb", "abs_eb", "ratio", "bits_per_value", "psnr", "max_abs_err", "max_err_over_eb", "compress_gbps", "decompress_gbps", "backend"}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks key %q", i, k)
			}
		}
		if r := m["max_err_over_eb"].(float64); r > 1 {
			t.Errorf("max_err_over_eb %g > 1", r)
		}
		if m["ratio"].(float64) < 2 {
			t.Errorf("ratio %v too low for a smooth field", m["ratio"])
		}
	}
	stdout, _, code = run(t, "eval", "--synthetic", "16x32x32", "--repeat", "1")
	if code != 0 || !strings.Contains(stdout, "synthetic-smooth-16x32x32") || !strings.Contains(stdout, "PSNR") {
		t.Fatalf("eval --synthetic exit %d:\n%s", code, stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeField(t, dir)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"compress", "--dims", "10x30x50", "--eb", "1e-3", "-o", "x.fz", in}, "missing --dtype"},
		{[]string{"compress", "--dtype", "f16", "--dims", "10x30x50", "--eb", "1e-3", "-o", "x.fz", in}, "unknown dtype"},
		{[]string{"compress", "--dtype", "f32", "--dims", "10x3a", "--eb", "1e-3", "-o", "x.fz", in}, "not a non-negative integer"},
		{[]string{"compress", "--dtype", "f32", "--dims", "10x30x50", "--eb", "-1", "-o", "x.fz", in}, "expected positive numbers"},
		{[]string{"compress", "--dtype", "f32", "--dims", "10x30x50", "--eb", "1e-3", in}, "missing -o"},
		{[]string{"compress", "--dtype", "f32", "--dims", "10x30x51", "--eb", "1e-3", "-o", filepath.Join(dir, "x.fz"), in}, "need 61200 bytes"},
		{[]string{"compress", "--dtype", "f32", "--dims", "10x30x50", "--eb", "1e-3", "--mode", "pct", "-o", "x.fz", in}, "unknown error-bound mode"},
		{[]string{"compress", "--dtype", "f32", "--dims", "10x30x50", "--eb", "1e-3", "--backend", "tpu", "-o", "x.fz", in}, "expected auto, cpu or gpu"},
		{[]string{"decompress", "-o", "x", filepath.Join(dir, "missing.fz")}, "no such file"},
		{[]string{"decompress", "-o", "x", in}, "bad magic"},
		{[]string{"nosuchcommand"}, "unknown command"},
		{[]string{"compress", "--bogus"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		_, stderr, code := run(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to contain %q", c.args, code, stderr, c.want)
		}
	}
	for _, cmd := range []string{"compress", "decompress", "inspect", "eval"} {
		_, stderr, code := run(t, cmd, "--help")
		if code != 0 || !strings.Contains(stderr, "Usage: fzsidecar "+cmd) {
			t.Errorf("%s --help: exit %d, %q", cmd, code, stderr)
		}
	}
}
