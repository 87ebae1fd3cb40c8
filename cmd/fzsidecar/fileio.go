package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/edsrzf/mmap-go"
)

// inputFile is a read-only view of a file: mapped when possible so a large
// input costs no copy, read into memory otherwise (pipes, empty files).
type inputFile struct {
	data []byte
	m    mmap.MMap
	f    *os.File
}

func openInput(path string) (*inputFile, error) {
	if path == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return &inputFile{data: b}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() == 0 {
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		return &inputFile{data: b}, nil
	}
	m, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return &inputFile{data: m, m: m, f: f}, nil
}

func (in *inputFile) Close() error {
	if in.m != nil {
		in.m.Unmap()
	}
	if in.f != nil {
		return in.f.Close()
	}
	return nil
}

// writeAtomic writes data to path via a temporary file in the same
// directory, fsync and rename, so a reader never sees a partial file.
// "-" writes to standard output.
func writeAtomic(path string, write func(w io.Writer) error) error {
	if path == "-" {
		return write(os.Stdout)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create output in %s: %w", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// CreateTemp makes 0600 files; an output is an ordinary file (the
	// umask still applies on creation of the final name's permissions).
	if err := tmp.Chmod(0o644 &^ processUmask); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	ok = true
	return nil
}

func writeBytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// processUmask is read once at start-up, before any goroutine could create
// a file while the umask is briefly changed.
var processUmask = umask()

// umask reads the process umask (setting it back at once).
func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}
