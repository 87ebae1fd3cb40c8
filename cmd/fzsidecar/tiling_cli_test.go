package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
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

// The accepted values, as every message about --tiling says them.
const wantTilings = "boxes (the default), flat, auto or padded"

// compress --tiling writes the tiles asked for (none: boxes; auto on the
// 10×30×50 test field, 73 % of whose values lie in clipped box tiles:
// flat); inspect reports them and checks every tile; decompress restores
// every value within the bound, NaN and the fill value bit for bit.
func TestCompressTiling(t *testing.T) {
	dir := t.TempDir()
	in, v := writeField(t, dir)
	for _, c := range []struct {
		name string
		flag []string
		flat bool
	}{{"default", nil, false}, {"boxes", []string{"--tiling", "boxes"}, false}, {"flat", []string{"--tiling", "flat"}, true},
		{"auto", []string{"--tiling", "auto"}, true}, {"flat-v2", []string{"--tiling", "FLAT", "--format-version", "2"}, true}} {
		fzf := filepath.Join(dir, c.name+".fz")
		args := append([]string{"compress", "--dtype", "f32", "--dims", "10x30x50", "--mode", "rel", "--eb", "1e-3", "--fill", "-1e34", "-o", fzf, in}, c.flag...)
		_, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: compress exit %d: %s", c.name, code, stderr)
		}
		want := map[bool]string{false: "boxes", true: "flat"}[c.flat]
		if !strings.Contains(stderr, ", "+want+" tiles,") {
			t.Errorf("%s: compress summary does not say %s tiles: %q", c.name, want, stderr)
		}
		stdout, stderr, code := run(t, "inspect", "--json", fzf)
		var rep map[string]any
		if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil {
			t.Fatalf("%s: inspect exit %d: %s %s", c.name, code, stdout, stderr)
		}
		if rep["tiling"] != want || rep["decode"] != "ok" {
			t.Fatalf("%s: inspect says tiling %v, decode %v; want %s, ok", c.name, rep["tiling"], rep["decode"], want)
		}
		stdout, _, _ = run(t, "inspect", fzf)
		if strings.Contains(stdout, "flat: runs of 4096 consecutive values") != c.flat {
			t.Errorf("%s: inspect text does not show the tiling:\n%s", c.name, stdout)
		}
		out := filepath.Join(dir, c.name+".f32")
		if _, stderr, code := run(t, "decompress", "--backend", "cpu", "-o", out, fzf); code != 0 {
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
	}

	// eval measures the tiling asked for and says which (auto: what it
	// took, docs/FORMAT.md §3.1: boxes where no tile is clipped, padded
	// for a 12×64×64 f32 field, clipped in z with whole sub-blocks).
	for _, c := range []struct{ dims, flag, want string }{{"16x32x32", "flat", "flat"}, {"16x32x32", "boxes", "boxes"},
		{"16x32x32", "auto", "boxes"}, {"12x64x64", "auto", "padded"}, {"12x64x64", "padded", "padded"}} {
		stdout, stderr, code := run(t, "eval", "--synthetic", c.dims, "--eb", "1e-3", "--repeat", "1", "--json", "--backend", "cpu", "--tiling", c.flag)
		var row map[string]any
		if code != 0 || json.Unmarshal([]byte(stdout), &row) != nil || row["tiling"] != c.want || row["violations"] != 0.0 {
			t.Errorf("eval --synthetic %s --tiling %s: exit %d, want tiling %s: %s %s", c.dims, c.flag, code, c.want, stdout, stderr)
		}
	}
}

// Bad tilings are refused before any work, naming the flag or key, the
// value and the accepted tilings; serve refuses to start.
func TestTilingRefused(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeField(t, dir)
	for _, bad := range []string{"", "box", "flat-tiles", "1", "autoo"} {
		out := filepath.Join(dir, "out.fz")
		_, stderr, code := run(t, "compress", "--dtype", "f32", "--dims", "10x30x50", "--eb", "1e-3", "--tiling", bad, "-o", out, in)
		if code != 2 || !strings.Contains(stderr, "tiling") || !strings.Contains(stderr, wantTilings) || !strings.Contains(stderr, `"`+bad+`"`) {
			t.Errorf("compress --tiling %q: exit %d, want 2 with the value and %q: %s", bad, code, wantTilings, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("compress --tiling %q wrote %s", bad, out)
		}
	}
	if _, stderr, code := run(t, "eval", "--synthetic", "8x8x8", "--tiling", "cubes"); code != 2 || !strings.Contains(stderr, wantTilings) {
		t.Errorf("eval --tiling cubes: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "bench-e2e", "--tiling", "cubes"); code != 2 || !strings.Contains(stderr, "tiling") || !strings.Contains(stderr, wantTilings) {
		t.Errorf("bench-e2e --tiling cubes: exit %d: %s", code, stderr)
	}

	e := newServeEnv(t)
	cfg := filepath.Join(dir, "sidecar.yaml")
	serveRefuses(t, e, cfg, []badSetting{
		{args: []string{"--tiling", "cubes"}, want: []string{"flag --tiling", `tiling "cubes"`, wantTilings}},
		{yaml: "backend: cpu\ntiling: 2\n", want: []string{"sidecar.yaml:2", `tiling "2"`, wantTilings}},
		{env: "FZ_TILING=flatt", want: []string{"environment FZ_TILING", `tiling "flatt"`, wantTilings}},
	})
}

// A real `fzsidecar serve --backend cpu` told tiling: flat (in its config
// file) stores every snapshot as a flat-tiled container that decodes
// within its bound.
func TestServeTilingFlat(t *testing.T) {
	const steps = 2
	vars := []string{"temp", "pres"}
	dims := []uint64{16, 64, 64}
	e := newServeEnv(t)
	cfg := filepath.Join(t.TempDir(), "sidecar.yaml")
	os.WriteFile(cfg, []byte("backend: cpu\ntiling: flat\n"), 0o644)
	srv := e.serve(t, "--config", cfg)
	if !srv.stderrHas("tiling=flat", 30*time.Second) {
		t.Errorf("serve's start-up log does not name tiling=flat:\n%s", lastN(srv.stderr(), 1500))
	}
	sim := start(t, "simulate", "--nats-url", e.url(), "--shm-dir", e.shm, "--run", "ft",
		"--vars", strings.Join(vars, ","), "--steps", "2", "--dims", "16x64x64", "--interval", "0",
		"--mode", "rel", "--eb", "1e-3", "--block-timeout", "2m")
	if code := sim.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("simulate exit %d", code)
	}
	if !strings.Contains(sim.stdout(), "4 stored, 0 failed, 0 skipped") {
		t.Fatalf("simulate summary: %s", lastN(sim.stdout(), 300))
	}
	ctx := context.Background()
	s, err := sinks.Open(ctx, e.sink)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := make([]float32, 16*64*64)
	for vi, v := range vars {
		for step := uint64(0); step < steps; step++ {
			blob, _, err := s.Get(ctx, sinks.Key{Run: "ft", Var: v, Step: step})
			if err != nil {
				t.Fatalf("%s step %d: %v", v, step, err)
			}
			h, raw, err := fz.Decompress(ctx, blob)
			if err != nil {
				t.Fatalf("%s step %d: %v", v, step, err)
			}
			if !h.Flat {
				t.Fatalf("%s step %d: the stored container has box tiles", v, step)
			}
			synth.Fill32(want, dims, vi, step)
			for i, w := range want {
				got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				if math.Abs(float64(got)-float64(w)) > h.AbsEB*(1+1e-6) {
					t.Fatalf("%s step %d element %d: %v vs %v, bound %v", v, step, i, got, w, h.AbsEB)
				}
			}
		}
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Errorf("serve exit %d after SIGTERM", code)
	}
}
