package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/synth"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// The accepted values, as every message about --format-version says them.
const wantVersions = "1 (the default) or 2"

// compress --format-version writes the version asked for (none: 1);
// inspect reports it and checks every tile; decompress restores every value
// within the bound, NaN and the fill value bit for bit.
func TestCompressFormatVersion(t *testing.T) {
	dir := t.TempDir()
	in, v := writeField(t, dir)
	size := map[string]int{}
	for _, c := range []struct {
		name string
		flag []string
		want float64
	}{{"default", nil, 1}, {"v1", []string{"--format-version", "1"}, 1}, {"v2", []string{"--format-version", "2"}, 2}} {
		fzf := filepath.Join(dir, c.name+".fz")
		args := append([]string{"compress", "--dtype", "f32", "--dims", "10x30x50", "--mode", "rel", "--eb", "1e-3", "--fill", "-1e34", "-o", fzf, in}, c.flag...)
		_, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: compress exit %d: %s", c.name, code, stderr)
		}
		if !strings.Contains(stderr, fmt.Sprintf("format version %d\n", int(c.want))) {
			t.Errorf("%s: compress summary does not name format version %v: %q", c.name, c.want, stderr)
		}
		stdout, stderr, code := run(t, "inspect", "--json", fzf)
		var rep map[string]any
		if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil {
			t.Fatalf("%s: inspect exit %d: %s %s", c.name, code, stdout, stderr)
		}
		if rep["version"] != c.want || rep["decode"] != "ok" {
			t.Fatalf("%s: inspect says version %v, decode %v; want version %v, decode ok", c.name, rep["version"], rep["decode"], c.want)
		}
		stdout, _, _ = run(t, "inspect", fzf)
		if !strings.Contains(stdout, fmt.Sprintf("FZSC version %d\n", int(c.want))) {
			t.Errorf("%s: inspect text lacks the version:\n%s", c.name, stdout)
		}
		out := filepath.Join(dir, c.name+".f32")
		if _, stderr, code := run(t, "decompress", "-o", out, fzf); code != 0 {
			t.Fatalf("%s: decompress exit %d: %s", c.name, code, stderr)
		}
		raw, err := os.ReadFile(out)
		if err != nil || len(raw) != 4*len(v) {
			t.Fatalf("%s: decompressed %d bytes (%v), want %d", c.name, len(raw), err, 4*len(v))
		}
		got := unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), len(v))
		eb := rep["abs_eb"].(float64)
		for i, x := range v {
			if i == 17 || i == 99 { // NaN and the fill value
				if math.Float32bits(x) != math.Float32bits(got[i]) {
					t.Fatalf("%s: value %d not bit-exact", c.name, i)
				}
			} else if math.Abs(float64(x)-float64(got[i])) > eb {
				t.Fatalf("%s: value %d off by %g > %g", c.name, i, math.Abs(float64(x)-float64(got[i])), eb)
			}
		}
		size[c.name] = int(rep["compressed_bytes"].(float64))
	}
	if size["default"] != size["v1"] {
		t.Errorf("the default wrote %d bytes, --format-version 1 %d: the default must be version 1", size["default"], size["v1"])
	}
	t.Logf("compressed bytes: v1 %d, v2 %d", size["v1"], size["v2"])
	if size["v2"] >= size["v1"] {
		t.Errorf("version 2 (%d bytes) is not smaller than version 1 (%d) on a smooth field", size["v2"], size["v1"])
	}

	// eval measures the version asked for and says which.
	stdout, stderr, code := run(t, "eval", "--synthetic", "16x32x32", "--eb", "1e-3", "--repeat", "1", "--json", "--format-version", "2")
	var row map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &row) != nil || row["format_version"] != 2.0 || row["violations"] != 0.0 {
		t.Errorf("eval --format-version 2: exit %d, %s %s", code, stdout, stderr)
	}
}

// Bad versions are refused before any work, naming the flag or key, the
// value and the accepted versions; serve refuses to start.
func TestFormatVersionRefused(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeField(t, dir)
	for _, bad := range []string{"0", "3", "x", "", "-1", "2.0"} {
		out := filepath.Join(dir, "out.fz")
		_, stderr, code := run(t, "compress", "--dtype", "f32", "--dims", "10x30x50", "--eb", "1e-3", "--format-version", bad, "-o", out, in)
		if code != 2 || !strings.Contains(stderr, "format-version") || !strings.Contains(stderr, wantVersions) || !strings.Contains(stderr, `"`+bad+`"`) {
			t.Errorf("compress --format-version %q: exit %d, want 2 with the value and %q: %s", bad, code, wantVersions, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("compress --format-version %q wrote %s", bad, out)
		}
	}
	if _, stderr, code := run(t, "eval", "--synthetic", "8x8x8", "--format-version", "3"); code != 2 || !strings.Contains(stderr, wantVersions) {
		t.Errorf("eval --format-version 3: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "bench-e2e", "--format-version", "3"); code != 2 || !strings.Contains(stderr, "format_version") || !strings.Contains(stderr, wantVersions) {
		t.Errorf("bench-e2e --format-version 3: exit %d: %s", code, stderr)
	}
	// bench refuses it before looking for a GPU.
	if _, stderr, code := run(t, "bench", "--format-version", "x"); code != 2 || !strings.Contains(stderr, wantVersions) {
		t.Errorf("bench --format-version x: exit %d: %s", code, stderr)
	}

	e := newServeEnv(t)
	cfg := filepath.Join(dir, "sidecar.yaml")
	serveRefuses(t, e, cfg, []badSetting{
		{args: []string{"--format-version", "3"}, want: []string{"flag --format-version", `format_version "3"`, wantVersions}},
		{args: []string{"--format-version", "0"}, want: []string{"flag --format-version", `format_version "0"`, wantVersions}},
		{yaml: "backend: cpu\nformat_version: two\n", want: []string{"sidecar.yaml:2", `format_version "two"`, wantVersions}},
		{env: "FZ_FORMAT_VERSION=9", want: []string{"environment FZ_FORMAT_VERSION", `format_version "9"`, wantVersions}},
	})
}

// A real `fzsidecar serve` told format_version: 2 (in its config file)
// stores every snapshot of a simulation as a version-2 container that
// decodes within its bound, through the Go reader and through `get`; the
// same run with no setting stores version 1.
func TestServeFormatVersion2(t *testing.T) {
	const steps = 3
	vars := []string{"temp", "pres"}
	dims := []uint64{16, 64, 64}
	stored := map[int]int{}
	for _, version := range []int{1, 2} {
		e := newServeEnv(t)
		var extra []string
		if version == 2 {
			cfg := filepath.Join(t.TempDir(), "sidecar.yaml")
			os.WriteFile(cfg, []byte("format_version: 2\n"), 0o644)
			extra = []string{"--config", cfg}
		}
		srv := e.serve(t, extra...)
		if !srv.stderrHas(fmt.Sprintf("format_version=%d", version), 30*time.Second) {
			t.Errorf("serve's start-up log does not name format_version=%d:\n%s", version, lastN(srv.stderr(), 1500))
		}
		sim := start(t, "simulate", "--nats-url", e.url(), "--shm-dir", e.shm, "--run", "fv",
			"--vars", strings.Join(vars, ","), "--steps", "3", "--dims", "16x64x64", "--interval", "0",
			"--mode", "rel", "--eb", "1e-3", "--block-timeout", "2m")
		if code := sim.wait(t, 120*time.Second); code != 0 {
			t.Fatalf("v%d: simulate exit %d", version, code)
		}
		if !strings.Contains(sim.stdout(), "6 stored, 0 failed, 0 skipped") {
			t.Fatalf("v%d: simulate summary: %s", version, lastN(sim.stdout(), 300))
		}
		ctx := context.Background()
		s, err := sinks.Open(ctx, e.sink)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, 16*64*64)
		for vi, v := range vars {
			for step := uint64(0); step < steps; step++ {
				blob, _, err := s.Get(ctx, sinks.Key{Run: "fv", Var: v, Step: step})
				if err != nil {
					t.Fatalf("v%d %s step %d: %v", version, v, step, err)
				}
				stored[version] += len(blob)
				h, raw, err := fz.Decompress(ctx, blob)
				if err != nil {
					t.Fatalf("v%d %s step %d: %v", version, v, step, err)
				}
				if int(h.Version) != version {
					t.Fatalf("%s step %d: stored container has version %d, want %d", v, step, h.Version, version)
				}
				synth.Fill32(want, dims, vi, step)
				for i, w := range want {
					got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
					if math.Abs(float64(got)-float64(w)) > h.AbsEB*(1+1e-6) {
						t.Fatalf("v%d %s step %d element %d: %v vs %v, bound %v", version, v, step, i, got, w, h.AbsEB)
					}
				}
			}
		}
		s.Close()
		// The CLI reader: get restores the values fz.Decompress gave, and
		// inspect of the stored container shows its version.
		out := filepath.Join(t.TempDir(), "pres.f32")
		if code, _, errOut := cli(t, "get", "--sink", e.sink, "--run", "fv", "--var", "pres", "--step", "2", "--backend", "cpu", "-o", out); code != 0 {
			t.Fatalf("v%d: get exit %d: %s", version, code, errOut)
		}
		raw, _ := os.ReadFile(out)
		synth.Fill32(want, dims, 1, 2)
		if len(raw) != 4*len(want) {
			t.Fatalf("v%d: get wrote %d bytes, want %d", version, len(raw), 4*len(want))
		}
		comp := filepath.Join(t.TempDir(), "pres.fz")
		if code, _, errOut := cli(t, "get", "--sink", e.sink, "--run", "fv", "--var", "pres", "--step", "2", "--compressed", "-o", comp); code != 0 {
			t.Fatalf("v%d: get --compressed exit %d: %s", version, code, errOut)
		}
		if stdout, _, code := run(t, "inspect", comp); code != 0 || !strings.Contains(stdout, fmt.Sprintf("FZSC version %d\n", version)) {
			t.Errorf("v%d: inspect of the stored object: exit %d:\n%s", version, code, stdout)
		}
		blob, _ := os.ReadFile(comp)
		h, err := fz.ReadHeader(blob)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if math.Abs(float64(got)-float64(w)) > h.AbsEB*(1+1e-6) {
				t.Fatalf("v%d: get: element %d: %v vs %v, bound %v", version, i, got, w, h.AbsEB)
			}
		}
		srv.cmd.Process.Signal(syscall.SIGTERM)
		if code := srv.wait(t, 30*time.Second); code != 0 {
			t.Errorf("v%d: serve exit %d after SIGTERM", version, code)
		}
	}
	t.Logf("stored bytes for %d snapshots: version 1 %d, version 2 %d (%.3f)", len(vars)*steps, stored[1], stored[2], float64(stored[2])/float64(stored[1]))
	if stored[2] >= stored[1] {
		t.Errorf("version 2 stored %d bytes, not fewer than version 1's %d", stored[2], stored[1])
	}
}

// badSetting is a setting `serve` must refuse: a flag, a config file or an
// environment variable, and what its message must name.
type badSetting struct {
	args []string
	yaml string
	env  string
	want []string
}

// serveRefuses starts a real `fzsidecar serve` with each bad setting
// (cfg: where the config file goes) and checks that it exits 2 before it
// is ready, with a message naming every want.
func serveRefuses(t *testing.T, e serveEnv, cfg string, cases []badSetting) {
	t.Helper()
	for _, c := range cases {
		args := []string{"serve", "--nats-listen", "127.0.0.1:0", "--shm-dir", e.shm, "--sink", e.sink, "--data-dir", e.data, "--metrics-listen", "off"}
		if c.yaml != "" {
			os.WriteFile(cfg, []byte(c.yaml), 0o644)
			args = append(args, "--config", cfg)
		}
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		p := start(t, append(args, c.args...)...)
		code := p.wait(t, 30*time.Second)
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
		if code != 2 {
			t.Errorf("serve %v %q %s: exit %d, want 2", c.args, c.yaml, c.env, code)
		}
		for _, w := range c.want {
			if !strings.Contains(p.stderr(), w) {
				t.Errorf("serve %v %q %s: message lacks %q: %s", c.args, c.yaml, c.env, w, p.stderr())
			}
		}
		if strings.Contains(p.stdout(), "fzsidecar ready") {
			t.Errorf("serve %v %q %s started", c.args, c.yaml, c.env)
		}
	}
}
