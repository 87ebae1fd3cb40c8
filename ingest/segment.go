package ingest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/edsrzf/mmap-go"
)

// ShmDir is the sidecar's view of the segment directory. It resolves every
// segment name through an os.Root, so neither "..", absolute paths nor
// symlinks (even ones swapped in between checks) can reach a file outside it.
type ShmDir struct {
	path string // cleaned absolute path as configured
	real string // with symlinks resolved, to accept absolute names through either spelling
	root *os.Root
}

// OpenShmDir opens (creating it if needed, mode 0700) the segment directory.
// It refuses a directory other users could change (shmdirsafe.go).
func OpenShmDir(dir string) (*ShmDir, error) {
	abs, root, err := openSafeShmDir(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("shm dir %q: %w", abs, err)
	}
	return &ShmDir{path: abs, real: real, root: root}, nil
}

// Path is the absolute directory path.
func (d *ShmDir) Path() string { return d.path }

// Close releases the directory handle.
func (d *ShmDir) Close() error { return d.root.Close() }

// relName turns a segment name from a message into a path relative to the
// directory, or explains why it is not acceptable.
func (d *ShmDir) relName(name string) (string, error) {
	if name == "" || len(name) > 4096 || strings.ContainsRune(name, 0) {
		return "", errorf(CodeBadSegment, "segment name %q: expected a non-empty file name inside %s", name, d.path)
	}
	for _, el := range strings.Split(filepath.ToSlash(name), "/") {
		if el == ".." {
			return "", errorf(CodeBadSegment, "segment name %q contains \"..\": expected a file name inside %s", name, d.path)
		}
	}
	rel := name
	if filepath.IsAbs(name) {
		c := filepath.Clean(name)
		var ok bool
		for _, base := range []string{d.path, d.real} {
			if r, err := filepath.Rel(base, c); err == nil && filepath.IsLocal(r) {
				rel, ok = r, true
				break
			}
		}
		if !ok {
			return "", errorf(CodeBadSegment, "segment %q lies outside the shm directory %s", name, d.path)
		}
	}
	if !filepath.IsLocal(rel) {
		return "", errorf(CodeBadSegment, "segment name %q: expected a file name inside %s", name, d.path)
	}
	if strings.HasPrefix(filepath.Base(rel), LocalAuthFile) { // never compress the password into the sink
		return "", errorf(CodeBadSegment, "segment name %q: the sidecar's credentials file is not a segment", name)
	}
	return filepath.Clean(rel), nil
}

// Mapping is a read-only view of part of a segment.
type Mapping struct {
	off  int64 // of the region in the file
	f    *os.File
	m    mmap.MMap // page-aligned mapping (nil for an empty region)
	data []byte    // the region the notification names
}

// Map opens segment name and maps bytes [off, off+length) read-only after
// checking that the file is a regular file inside the directory and long
// enough. All failures are *Error with a code saying what was wrong.
func (d *ShmDir) Map(name string, off, length int64) (*Mapping, error) {
	rel, err := d.relName(name)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO planted in the directory must not hang the open.
	f, err := d.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(CodeNoSegment, "segment %q does not exist in %s (producer and sidecar must use the same shm directory: --shm-dir)", name, d.path)
		}
		return nil, errorf(CodeBadSegment, "segment %q cannot be opened inside %s: %v", name, d.path, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, errorf(CodeBadSegment, "stat segment %q: %v", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, errorf(CodeBadSegment, "segment %q is a %v, not a regular file", name, st.Mode().Type())
	}
	// A hard link could make a file from elsewhere on the same filesystem
	// appear inside the directory; segments are fresh files with one link.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return nil, errorf(CodeBadSegment, "segment %q has %d hard links: expected a file created for this snapshot", name, sys.Nlink)
	}
	if off < 0 || length < 0 || off > st.Size() || length > st.Size()-off {
		return nil, errorf(CodeSizeMismatch, "segment %q is %d bytes but the notification names bytes [%d, %d): the file is shorter than announced", name, st.Size(), off, off+length)
	}
	mp := &Mapping{f: f, off: off}
	if length > 0 {
		if int64(int(length)) != length {
			return nil, errorf(CodeTooLarge, "region of %d bytes cannot be mapped on this platform", length)
		}
		page := int64(os.Getpagesize())
		start := off - off%page
		m, err := mmap.MapRegion(f, int(off-start+length), mmap.RDONLY, 0, start)
		if err != nil {
			return nil, errorf(CodeBadSegment, "map segment %q: %v", name, err)
		}
		mp.m = m
		mp.data = m[off-start:]
	}
	ok = true
	return mp, nil
}

// Bytes is the mapped region. Reading it faults if the producer truncates
// the file meanwhile; use CopyTo where that must not crash the process.
func (m *Mapping) Bytes() []byte { return m.data }

// Len is the region's length.
func (m *Mapping) Len() int64 { return int64(len(m.data)) }

// CopyTo copies the region into dst (len(dst) must equal Len). A producer
// that truncates the file while we read would otherwise kill the whole
// sidecar with SIGBUS; SetPanicOnFault turns that into a recoverable panic
// for this goroutine only, which becomes a CodeTruncated error.
func (m *Mapping) CopyTo(dst []byte) error {
	if len(dst) != len(m.data) {
		return fmt.Errorf("copy segment: destination is %d bytes, region is %d", len(dst), len(m.data))
	}
	return GuardedCopy(dst, m.data)
}

// GuardedCopy copies src into dst (equal lengths) like CopyTo, for a part
// of a mapping: a fault (the producer truncated the file) becomes a
// CodeTruncated error for this goroutine instead of killing the process.
func GuardedCopy(dst, src []byte) (err error) {
	if len(dst) != len(src) {
		return fmt.Errorf("copy segment: destination is %d bytes, source %d", len(dst), len(src))
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = errorf(CodeTruncated, "segment changed size while being read (%v): the producer must not modify a segment before its result arrives", r)
		}
	}()
	copy(dst, src)
	return nil
}

// Pages is the whole page-aligned mapping that holds Bytes (what a
// cudaHostRegister must cover).
func (m *Mapping) Pages() []byte { return m.m }

// SegmentID identifies the file contents a mapping shows: the same inode at
// the same size and change time, and the same region. A producer that
// truncates or re-creates a segment changes it, so a cache keyed by it
// (registered, page-locked mappings) never serves stale pages.
type SegmentID struct {
	Dev, Ino    uint64
	Size, Ctime int64
	Off, Len    int64
}

// ID identifies the mapped region (fstat of the open file).
func (m *Mapping) ID() (SegmentID, error) {
	if m.f == nil {
		return SegmentID{}, errors.New("mapping closed")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(m.f.Fd()), &st); err != nil {
		return SegmentID{}, fmt.Errorf("stat segment: %w", err)
	}
	return SegmentID{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Ctime: st.Ctim.Nano(),
		Off: m.off, Len: int64(len(m.data))}, nil
}

// Stale reports whether the file no longer matches id: unlinked, resized
// or changed (its pages may no longer be the file's).
func (m *Mapping) Stale(id SegmentID) bool {
	if m.f == nil {
		return true
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(m.f.Fd()), &st); err != nil {
		return true
	}
	return st.Nlink == 0 || uint64(st.Dev) != id.Dev || st.Ino != id.Ino || st.Size != id.Size || st.Ctim.Nano() != id.Ctime
}

// Close unmaps and closes the segment. The producer, not the sidecar, owns
// and removes the file.
func (m *Mapping) Close() error {
	var errs []error
	if m.m != nil {
		errs = append(errs, m.m.Unmap())
		m.m, m.data = nil, nil
	}
	if m.f != nil {
		errs = append(errs, m.f.Close())
		m.f = nil
	}
	return errors.Join(errs...)
}
