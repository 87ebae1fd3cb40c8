package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The README's first command: runs on its own (embedded NATS, CPU, local
// sink), passes its checks, leaves only the sink behind, and is quick.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	sink := filepath.Join(dir, "fzdata")
	t0 := time.Now()
	p := start(t, "demo", "--sink", sink, "--backend", "cpu", "--run", "d1", "--steps", "3", "--dims", "32x64x64", "--nats-listen", "127.0.0.1:0")
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("demo exit %d:\n%s\n%s", code, p.stdout(), p.stderr())
	}
	out := p.stdout()
	t.Logf("demo took %v:\n%s", time.Since(t0).Round(time.Millisecond), out)
	for _, w := range []string{"PASS", "temperature", "pressure", "density", "9 snapshots stored, 0 failed", "max err / eb"} {
		if !strings.Contains(out, w) {
			t.Errorf("demo output lacks %q", w)
		}
	}
	// What it stored is there for `ls` and `restore`.
	ls := mustCLI(t, "ls", "--sink", sink, "--run", "d1")
	if !strings.Contains(ls, "temperature") || !strings.Contains(ls, "density") {
		t.Errorf("ls after the demo:\n%s", ls)
	}
	// Running it again with the same run is idempotent (same bytes), still PASS.
	p = start(t, "demo", "--sink", sink, "--backend", "cpu", "--run", "d1", "--steps", "3", "--dims", "32x64x64", "--nats-listen", "127.0.0.1:0")
	if code := p.wait(t, 90*time.Second); code != 0 || !strings.Contains(p.stdout(), "PASS") {
		t.Fatalf("second demo exit %d:\n%s\n%s", code, p.stdout(), p.stderr())
	}
	// A different field under the same run and steps conflicts: the demo
	// must then fail (exit 1), not claim success.
	p = start(t, "demo", "--sink", sink, "--backend", "cpu", "--run", "d1", "--steps", "3", "--dims", "32x64x32", "--nats-listen", "127.0.0.1:0")
	if code := p.wait(t, 90*time.Second); code != 1 || !strings.Contains(p.stdout(), "FAIL") || !strings.Contains(p.stdout(), "conflict") {
		t.Fatalf("conflicting demo exit %d:\n%s\n%s", code, p.stdout(), p.stderr())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("demo left %d entries in its directory, want only the sink", len(ents))
	}
}
