package ingest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// Segment is a producer-owned shared-memory file, mapped read-write. The
// producer creates it, fills it in place, and removes it after the result
// arrives (Remove); the sidecar only maps it read-only.
type Segment struct {
	path string
	name string // relative to the shm dir, as sent in notifications
	f    *os.File
	m    mmap.MMap
}

// CreateSegment makes a new segment of size bytes in dir (created mode 0700
// if missing; refused if other users could change it) with a unique name starting with prefix. Space is reserved
// with fallocate so that a full /dev/shm fails here with an error rather
// than later with SIGBUS while the simulation writes into the mapping.
func CreateSegment(dir, prefix string, size int64) (*Segment, error) {
	if size < 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("segment size %d: expected 0 <= size <= %d", size, int64(^uint(0)>>1))
	}
	// A directory others may change would let them swap the published
	// segment for their own file: refused (shmdirsafe.go).
	abs, root, err := openSafeShmDir(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	name := prefix + "-" + hex.EncodeToString(rnd[:]) + ".seg"
	path := filepath.Join(abs, name)
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	s := &Segment{path: path, name: name, f: f}
	if size > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
			if !errors.Is(err, unix.EOPNOTSUPP) {
				s.Remove()
				return nil, fmt.Errorf("reserve %d bytes for segment %s: %w", size, path, err)
			}
			// Filesystems without fallocate: fall back to a sparse file.
			if err := f.Truncate(size); err != nil {
				s.Remove()
				return nil, fmt.Errorf("size segment %s: %w", path, err)
			}
		}
		m, err := mmap.MapRegion(f, int(size), mmap.RDWR, 0, 0)
		if err != nil {
			s.Remove()
			return nil, fmt.Errorf("map segment %s: %w", path, err)
		}
		s.m = m
	}
	return s, nil
}

// Name is the segment name to put in a notification.
func (s *Segment) Name() string { return s.name }

// Path is the file's full path.
func (s *Segment) Path() string { return s.path }

// Bytes is the whole mapped segment.
func (s *Segment) Bytes() []byte { return s.m }

// Float32 views the segment as float32 values (native byte order, which the
// protocol requires to be little-endian). The mapping is page-aligned, so the
// view is aligned too. Writing into it writes the segment: no copy.
func (s *Segment) Float32() []float32 {
	if len(s.m) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&s.m[0])), len(s.m)/4)
}

// Float64 views the segment as float64 values.
func (s *Segment) Float64() []float64 {
	if len(s.m) < 8 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&s.m[0])), len(s.m)/8)
}

// Remove unmaps, closes and deletes the segment. Deleting is always safe,
// even while the sidecar still maps it (the pages live until it unmaps);
// overwriting before the result arrives is not.
func (s *Segment) Remove() error {
	var errs []error
	if s.m != nil {
		errs = append(errs, s.m.Unmap())
		s.m = nil
	}
	if s.f != nil {
		errs = append(errs, s.f.Close())
		s.f = nil
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
