package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func newShm(t *testing.T) (*ShmDir, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shm")
	d, err := OpenShmDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, dir
}

func wantCode(t *testing.T, err error, code Code) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("got %v, want code %s", err, code)
	}
}

func TestMapRegion(t *testing.T) {
	d, dir := newShm(t)
	data := make([]byte, 3*4096+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.seg"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Unaligned offset, and an absolute name inside the directory.
	for _, name := range []string{"a.seg", filepath.Join(dir, "a.seg"), "./a.seg"} {
		m, err := d.Map(name, 4100, 8000)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := make([]byte, m.Len())
		if err := m.CopyTo(got); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(data[4100:12100]) {
			t.Fatalf("%s: wrong bytes", name)
		}
		if string(m.Bytes()) != string(data[4100:12100]) {
			t.Fatal("Bytes differ")
		}
		m.Close()
	}
	m, err := d.Map("a.seg", 10, 0)
	if err != nil || m.Len() != 0 {
		t.Fatalf("empty region: %v", err)
	}
	m.Close()
}

func TestMapHostile(t *testing.T) {
	d, dir := newShm(t)
	outside := filepath.Join(filepath.Dir(dir), "secret")
	if err := os.WriteFile(outside, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ok.seg"), make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.seg")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "..", "other")
	os.WriteFile(other, make([]byte, 100), 0o600)
	if err := os.Link(other, filepath.Join(dir, "hard.seg")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		off, size int64
		code      Code
	}{
		{"../secret", 0, 16, CodeBadSegment},
		{"sub/../../secret", 0, 16, CodeBadSegment},
		{outside, 0, 16, CodeBadSegment},
		{"/etc/passwd", 0, 16, CodeBadSegment},
		{"link.seg", 0, 16, CodeBadSegment},
		{"up/secret", 0, 16, CodeBadSegment},
		{"sub", 0, 16, CodeBadSegment},
		{"fifo", 0, 16, CodeBadSegment},
		{"hard.seg", 0, 16, CodeBadSegment},
		{"", 0, 16, CodeBadSegment},
		{"nul\x00.seg", 0, 16, CodeBadSegment},
		{"missing.seg", 0, 16, CodeNoSegment},
		{"ok.seg", 0, 1001, CodeSizeMismatch},
		{"ok.seg", 999, 2, CodeSizeMismatch},
		{"ok.seg", 2000, 0, CodeSizeMismatch},
		{"ok.seg", -1, 2, CodeSizeMismatch},
	}
	for _, c := range cases {
		m, err := d.Map(c.name, c.off, c.size)
		if err == nil {
			m.Close()
		}
		t.Run(c.name, func(t *testing.T) { wantCode(t, err, c.code) })
	}
}

// A producer that truncates its segment while the sidecar reads it must
// produce an error, not a SIGBUS that kills the sidecar.
func TestCopyTruncated(t *testing.T) {
	d, dir := newShm(t)
	path := filepath.Join(dir, "t.seg")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := d.Map("t.seg", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	wantCode(t, m.CopyTo(make([]byte, 1<<20)), CodeTruncated)
}

func TestCreateSegmentViews(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shm")
	s, err := CreateSegment(dir, "p", 64)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Float32()
	if len(f) != 16 || len(s.Float64()) != 8 {
		t.Fatalf("views %d %d", len(f), len(s.Float64()))
	}
	f[3] = 1.5
	b, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	// 1.5f little-endian is 00 00 c0 3f: written through the mapping, no copy.
	if b[12] != 0 || b[14] != 0xc0 || b[15] != 0x3f {
		t.Fatalf("file bytes %x", b[12:16])
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Fatalf("segment not removed: %v", err)
	}
}
