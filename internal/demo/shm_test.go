package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without /dev/shm (macOS, some containers) the demo's segments go to the
// temp directory instead.
func TestShmDirFallback(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, err := shmDirIn(filepath.Join(t.TempDir(), "no-such-shm"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(d)
	if !strings.HasPrefix(d, os.TempDir()) || !strings.Contains(d, "fzsidecar-demo-shm-") {
		t.Fatalf("fallback dir %s not under %s", d, os.TempDir())
	}
	have := t.TempDir()
	d, err = shmDirIn(have)
	if err != nil || filepath.Dir(d) != have {
		t.Fatalf("with a shm dir: %s %v", d, err)
	}
}
