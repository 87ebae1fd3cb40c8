package sinks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Local keeps blobs under a root directory:
//
//	<root>/<run>/<var>/<step>.fz        the blob, byte for byte
//	<root>/<run>/<var>/<step>.fz.json   its Meta (the sidecar)
//	<root>/<run>/<var>/.lock            serialises writers of that variable
//	<root>/<run>/<var>/.tmp-*           files being written (or crash leftovers)
//
// A Put writes the blob to a temp file and fsyncs it, then writes the sidecar
// the same way and renames it into place, then renames the blob into place
// and fsyncs the directory. The blob's rename is the commit point: before it
// the key does not exist (an orphan sidecar is ignored and overwritten); after
// it both files are complete. Writers of one variable hold an flock on .lock,
// which makes create-only checks race-free across processes and lets a writer
// delete temp files left by crashed writers.
type local struct {
	root string
	log  *slog.Logger
	max  int64
}

const (
	tmpPrefix   = ".tmp-"
	lockName    = ".lock"
	sidecarExt  = ".json"
	dirPerm     = 0o755
	filePerm    = 0o644
	lockPollDur = 20 * time.Millisecond
)

// writeHook, when set by tests, replaces (*os.File).Write for blob and
// sidecar data: it is the file-layer fault injection point (ENOSPC, EIO).
var writeHook func(f *os.File, b []byte) (int, error)

func openLocal(path string, o options) (Sink, error) {
	if strings.TrimSpace(path) == "" {
		return nil, errors.New("empty sink path: expected a directory")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sink path %q: %w", path, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("sink path %s is a file: expected a directory", abs)
	}
	return &local{root: abs, log: o.log, max: o.maxObject}, nil
}

// CheckWritable makes sure s can store objects, for a process about to
// accept snapshots (fzsidecar serve): a local sink's directory is created
// if missing and a probe file is written, fsynced and removed, so that an
// unusable path fails at start with the reason instead of failing every
// snapshot later. Other sinks are checked when opened (S3: the bucket).
// Read-only users (ls, get) do not call it.
func CheckWritable(ctx context.Context, s Sink) error {
	l, ok := s.(*local)
	if !ok {
		return ctx.Err()
	}
	if err := mkdirAllSync(l.root); err != nil {
		return fmt.Errorf("sink %s is not usable: creating its directory: %w", l, err)
	}
	tmp, err := writeTemp(l.root, []byte("fzsidecar write probe\n"))
	if err != nil {
		return fmt.Errorf("sink %s is not writable: %w", l, err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("sink %s: removing the write probe %s: %w", l, tmp, err)
	}
	return nil
}

func (l *local) String() string { return "file://" + filepath.ToSlash(l.root) }
func (l *local) Close() error   { return nil }

func (l *local) blobPath(k Key) string { return filepath.Join(l.root, filepath.FromSlash(k.relPath())) }

func (l *local) Put(ctx context.Context, k Key, blob []byte, m Meta) error {
	m, err := prepare(k, blob, m)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	final := l.blobPath(k)
	dir := filepath.Dir(final)
	if err := mkdirAllSync(dir); err != nil {
		return fmt.Errorf("put %s: %w", final, err)
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return fmt.Errorf("put %s: %w", final, err)
	}
	defer unlock()
	l.removeStaleTemps(dir)

	if _, err := os.Lstat(final); err == nil {
		return l.putExisting(k, final, blob, m)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("put %s: %w", final, err)
	}

	blobTmp, err := writeTemp(dir, blob)
	if err != nil {
		return fmt.Errorf("put %s: writing blob: %w", final, err)
	}
	committed := false
	defer func() {
		if !committed {
			os.Remove(blobTmp)
		}
	}()
	sc, err := encodeSidecar(m)
	if err != nil {
		return fmt.Errorf("put %s: %w", final, err)
	}
	if err := writeFileAtomic(dir, final+sidecarExt, sc); err != nil {
		return fmt.Errorf("put %s: writing sidecar: %w", final, err)
	}
	if err := ctx.Err(); err != nil {
		os.Remove(final + sidecarExt)
		return err
	}
	if err := os.Rename(blobTmp, final); err != nil {
		os.Remove(final + sidecarExt)
		return fmt.Errorf("put %s: %w", final, err)
	}
	committed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("put %s: stored, but syncing its directory failed: %w", final, err)
	}
	return nil
}

// putExisting handles a Put whose key is already taken: same bytes → nil.
func (l *local) putExisting(k Key, final string, blob []byte, m Meta) error {
	have, err := l.readMeta(final)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("put %s: already exists and its sidecar is unreadable: %w", final, err)
		}
		// A blob without sidecar is not ours (none of our crash points
		// leaves one): compare bytes, and adopt it if they are the same.
		old, err := os.ReadFile(final)
		if err != nil {
			return fmt.Errorf("put %s: %w", final, err)
		}
		if !bytes.Equal(old, blob) {
			return &ConflictError{Object: final, HaveCRC32C: CRC32C(old), HaveSize: uint64(len(old)), PutCRC32C: m.CRC32C, PutSize: m.Stored}
		}
		sc, err := encodeSidecar(m)
		if err == nil {
			err = writeFileAtomic(filepath.Dir(final), final+sidecarExt, sc)
		}
		if err != nil {
			return fmt.Errorf("put %s: blob exists, writing its missing sidecar: %w", final, err)
		}
		return nil
	}
	if have.CRC32C != m.CRC32C || have.Stored != m.Stored {
		return &ConflictError{Object: final, HaveCRC32C: have.CRC32C, HaveSize: have.Stored, PutCRC32C: m.CRC32C, PutSize: m.Stored}
	}
	// Equal CRC32C and size do not make equal bytes: a container's header
	// and index each end in their own CRC32C, and a CRC run over data
	// followed by its CRC always reaches the same state, so two containers
	// that differ only there (fill, bound, mode, range) share the blob's
	// CRC32C. Compare the bytes (only on a taken key: retries, repeats).
	old, err := os.ReadFile(final)
	if err != nil {
		return fmt.Errorf("put %s: already exists, reading it to compare: %w", final, err)
	}
	if !bytes.Equal(old, blob) {
		return &ConflictError{Object: final, HaveCRC32C: CRC32C(old), HaveSize: uint64(len(old)), PutCRC32C: m.CRC32C, PutSize: m.Stored}
	}
	l.log.Debug("put: identical blob already stored", "object", final)
	return nil
}

func (l *local) readMeta(final string) (Meta, error) {
	f, err := os.Open(final + sidecarExt)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSidecarBytes+1))
	if err != nil {
		return Meta{}, err
	}
	if len(b) > maxSidecarBytes {
		return Meta{}, fmt.Errorf("sidecar %s is over %d bytes", final+sidecarExt, maxSidecarBytes)
	}
	m, err := decodeSidecar(b)
	if err != nil {
		return Meta{}, fmt.Errorf("sidecar %s: %w", final+sidecarExt, err)
	}
	return m, nil
}

func (l *local) Stat(ctx context.Context, k Key) (Meta, error) {
	if err := k.Validate(); err != nil {
		return Meta{}, err
	}
	final := l.blobPath(k)
	fi, err := os.Stat(final)
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, notFound(ctx, l, k)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("stat %s: %w", final, err)
	}
	m, err := l.readMeta(final)
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, fmt.Errorf("%s has no sidecar %s: it was not stored through a sink; store it with 'fzsidecar put'", final, filepath.Base(final)+sidecarExt)
	}
	if err != nil {
		return Meta{}, err
	}
	if uint64(fi.Size()) != m.Stored {
		return m, fmt.Errorf("%s is %d bytes but its sidecar says %d: truncated or replaced: %w", final, fi.Size(), m.Stored, ErrChecksum)
	}
	return m, nil
}

func (l *local) Get(ctx context.Context, k Key) ([]byte, Meta, error) {
	m, err := l.Stat(ctx, k)
	if err != nil {
		return nil, m, err
	}
	final := l.blobPath(k)
	if m.Stored > uint64(l.max) {
		return nil, m, fmt.Errorf("%s is %d bytes, above the %d-byte limit for one object (raise it with WithMaxObjectBytes)", final, m.Stored, l.max)
	}
	f, err := os.Open(final)
	if err != nil {
		return nil, m, fmt.Errorf("get %s: %w", final, err)
	}
	defer f.Close()
	buf := make([]byte, m.Stored)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, m, fmt.Errorf("get %s: %w", final, err)
	}
	if got := CRC32C(buf); got != m.CRC32C {
		return nil, m, &ChecksumError{Object: final, Want: m.CRC32C, Got: got}
	}
	return buf, m, nil
}

func (l *local) ReadRange(ctx context.Context, k Key, off, n int64) ([]byte, error) {
	m, err := l.Stat(ctx, k)
	if err != nil {
		return nil, err
	}
	final := l.blobPath(k)
	if err := checkRange(final, off, n, int64(m.Stored), l.max); err != nil {
		return nil, err
	}
	f, err := os.Open(final)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", final, err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("read %s at %d+%d: %w", final, off, n, err)
	}
	return buf, nil
}

func checkRange(obj string, off, n, size, max int64) error {
	if off < 0 || n < 0 || off > size || n > size-off {
		return fmt.Errorf("range %d+%d is outside %s (%d bytes): expected 0 <= offset <= offset+length <= size", off, n, obj, size)
	}
	if n > max {
		return fmt.Errorf("range of %d bytes of %s is above the %d-byte limit for one read", n, obj, max)
	}
	return nil
}

func (l *local) List(ctx context.Context, f Filter) ([]Entry, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	runs, err := l.subdirs(l.root, f.Run)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, run := range runs {
		vars, err := l.subdirs(filepath.Join(l.root, run), f.Var)
		if err != nil {
			return nil, err
		}
		for _, v := range vars {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			dir := filepath.Join(l.root, run, v)
			des, err := os.ReadDir(dir)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", dir, err)
			}
			for _, de := range des {
				k, ok := parseRel(run + "/" + v + "/" + de.Name())
				if !ok || !de.Type().IsRegular() {
					continue
				}
				m, err := l.readMeta(filepath.Join(dir, de.Name()))
				if err != nil {
					// One bad object must not hide the rest of the catalog;
					// Get on it reports the problem.
					l.log.Warn("list: skipping blob without a readable sidecar", "object", filepath.Join(dir, de.Name()), "err", err)
					continue
				}
				out = append(out, Entry{Key: k, Meta: m})
			}
		}
	}
	sortEntries(out)
	return out, nil
}

// subdirs lists valid-named directories of dir, or only "only" if given. A
// missing directory is empty: a sink nobody wrote to yet.
func (l *local) subdirs(dir, only string) ([]string, error) {
	if only != "" {
		fi, err := os.Stat(filepath.Join(dir, only))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		if !fi.IsDir() {
			return nil, nil
		}
		return []string{only}, nil
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
	for _, de := range des {
		if de.IsDir() && ValidateName("name", de.Name()) == nil {
			out = append(out, de.Name())
		}
	}
	return out, nil
}

// removeStaleTemps deletes temp files in dir. Only called with dir's lock
// held: every writer of dir holds it while its temp files exist, so any temp
// file seen here was left by a writer that died.
func (l *local) removeStaleTemps(dir string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tmpPrefix) {
			p := filepath.Join(dir, de.Name())
			if err := os.Remove(p); err == nil {
				l.log.Info("removed temp file left by an interrupted put", "file", p)
			}
		}
	}
}

func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	// Non-blocking tries so that a cancelled context stops the wait.
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", f.Name(), ctx.Err())
		case <-time.After(lockPollDur):
		}
	}
}

func tempName(dir string) string {
	var b [8]byte
	rand.Read(b[:])
	return filepath.Join(dir, tmpPrefix+hex.EncodeToString(b[:]))
}

// writeTemp writes data to a new fsynced temp file in dir and returns its
// name; on error nothing is left behind.
func writeTemp(dir string, data []byte) (string, error) {
	name := tempName(dir)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return "", err
	}
	err = writeAll(f, data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func writeAll(f *os.File, b []byte) error {
	if writeHook == nil {
		_, err := f.Write(b)
		return err
	}
	n, err := writeHook(f, b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// writeFileAtomic replaces dst by data: temp file, fsync, rename.
func writeFileAtomic(dir, dst string, data []byte) error {
	tmp, err := writeTemp(dir, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdirAllSync creates dir and missing parents, fsyncing each parent that
// got a new entry so the new directories survive a crash.
func mkdirAllSync(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory: %w", dir, unix.ENOTDIR)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}
