package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve with a sink it cannot write refuses to start, saying why, instead
// of reporting ready and then retrying every snapshot while producers wait
// in silence.
func TestServeRefusesUnusableSink(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ sink, want string }{
		{"/proc/nope", "mkdir /proc/nope"},
		{file + "/fzdata", "not a directory"},
	} {
		e := newServeEnv(t)
		p := start(t, "serve", "--nats-listen", e.listen, "--shm-dir", e.shm, "--sink", c.sink,
			"--data-dir", e.data, "--backend", "cpu", "--metrics-listen", "off")
		code := p.wait(t, 30*time.Second)
		if code == 0 || strings.Contains(p.stdout(), "fzsidecar ready") {
			t.Errorf("serve --sink %s: exit %d, stdout %q: want a refusal at start", c.sink, code, p.stdout())
		}
		if msg := p.stderr(); !strings.Contains(msg, "sink") || !strings.Contains(msg, c.want) {
			t.Errorf("serve --sink %s: stderr does not say what is wrong with the sink (want %q):\n%s", c.sink, c.want, lastN(msg, 1500))
		}
	}
}
