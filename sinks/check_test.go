package sinks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckWritable(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWritable(ctx, s); err != nil {
		t.Fatalf("new nested directory: %v", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 0 {
		t.Fatalf("probe left behind or directory missing: %v %v", ents, err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, bad := range []string{"/proc/nope", file + "/sub"} {
		s, err := Open(ctx, bad)
		if err != nil {
			continue // refused at open: fine too
		}
		err = CheckWritable(ctx, s)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: want an error naming the sink, got %v", bad, err)
		}
	}
	if os.Geteuid() != 0 { // root writes anyway
		ro := t.TempDir()
		os.Chmod(ro, 0o500)
		defer os.Chmod(ro, 0o700)
		s, _ := Open(ctx, ro)
		if err := CheckWritable(ctx, s); err == nil || Retryable(err) {
			t.Errorf("read-only directory: want a permanent error, got %v", err)
		}
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&ConflictError{Object: "x"}, false},
		{invalid(os.ErrInvalid), false},
		{&os.PathError{Op: "mkdir", Path: "/x", Err: os.ErrPermission}, false},
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, true},
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}, false},
		{permanent(os.ErrDeadlineExceeded), true}, // S3 attempts exhausted on a timeout
	} {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
