package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"
)

// DefaultReclaimAfter is how long a segment must lie unused before the
// sidecar removes it as left behind by a producer that died.
const DefaultReclaimAfter = 10 * time.Minute

// Reclaiming orphaned segments.
//
// A producer that dies between creating a segment and receiving its result
// leaves the file behind, and on tmpfs it holds memory until someone
// removes it. The sidecar removes such a file only when all of these hold
// (docs/PROTOCOL.md §2), each of which a producer still using the file
// would break:
//
//   - it is a regular file with one link, owned by the sidecar's user and
//     not accessible to group or others, whose name and directories do not
//     start with "." (the credentials file .fzsidecar-auth and anything
//     hidden stay);
//   - neither its contents nor its inode changed for ReclaimAfter;
//   - no process has it open or mapped. The kernel says so: a write lease
//     (F_SETLEASE) is granted only while no other open file or writable
//     mapping of the file exists, in any process, container or user.
//     Producers keep their segment mapped read-write from creation until
//     the result (the Go, C, Fortran and Python producers all do). Kernels
//     without read-open tracking miss read-only users, so /proc/<pid>/maps
//     and fd of every process the sidecar may inspect are checked too (its
//     own read-only mappings included). Where leases are not available
//     nothing is removed;
//   - no notification in the snapshot stream names it (queued, or being
//     worked on: those stay in the stream until answered).

// reclaimLoop sweeps the shm directory every interval until r.base ends.
func (r *Receiver) reclaimLoop(every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.base.Done():
			return
		case <-t.C:
		}
		if _, err := r.ReclaimOrphans(r.base); err != nil && r.base.Err() == nil {
			r.log.Warn("reclaiming orphaned segments", "shm_dir", r.shm.Path(), "err", err)
		}
	}
}

// Reclaimed is the number of orphaned segments removed so far.
func (r *Receiver) Reclaimed() int64 { return r.reclaimed.Load() }

// ReclaimOrphans removes segments left behind by producers that died, by
// the rule above, and returns their names.
func (r *Receiver) ReclaimOrphans(ctx context.Context) ([]string, error) {
	age := r.cfg.ReclaimAfter
	if age <= 0 {
		return nil, nil
	}
	cands, err := r.shm.orphanCandidates(time.Now().Add(-age))
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	// Cheap checks first; the stream is read only for files nobody uses.
	inUse := openInodes()
	for rel, c := range cands {
		if inUse[c.inode] {
			delete(cands, rel)
		} else if err := r.shm.withUnused(rel, c, func() error { return nil }); err != nil {
			delete(cands, rel)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	// Last, the stream: a notification naming one of them keeps it.
	err = queuedNotifications(ctx, r.snap, r.cfg.Subjects, func(m *jetstream.RawStreamMsg) {
		n, _, _, err := DecodeNotification(m.Data)
		if err != nil {
			return
		}
		if rel, err := r.shm.relName(n.Segment); err == nil {
			delete(cands, rel)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list queued notifications: %w", err)
	}
	var removed []string
	for rel, c := range cands {
		var size int64
		err := r.shm.withUnused(rel, c, func() error {
			var now syscall.Stat_t
			if err := r.shm.lstat(rel, &now); err != nil || fileInode(&now) != c.inode {
				return errors.New("replaced since it was judged")
			}
			size = now.Size
			return r.shm.root.Remove(rel)
		})
		if err != nil {
			r.log.Debug("orphan candidate kept", "segment", rel, "why", err)
			continue
		}
		r.reclaimed.Add(1)
		removed = append(removed, rel)
		r.log.Info("removed a segment left behind by a producer that died", "segment", rel, "bytes", size,
			"unused_for", time.Since(time.Unix(0, max(c.mtime, c.ctime))).Round(time.Second))
	}
	return removed, nil
}

// withUnused runs fn while holding a write lease on rel, which the kernel
// grants only while no other process has the file open or mapped, after
// checking that rel is still candidate c. A process opening the file
// meanwhile waits for fn (then the lease is let go) instead of racing it.
func (d *ShmDir) withUnused(rel string, c candidate, fn func() error) error {
	f, err := d.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if fileInode(&st) != c.inode || st.Mtim.Nano() != c.mtime || st.Ctim.Nano() != c.ctime || st.Nlink != 1 {
		return errors.New("changed since it was judged")
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		return fmt.Errorf("in use, or leases unavailable: %w", err)
	}
	defer unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
	return fn()
}

// inode identifies a file across processes.
type inode struct{ dev, ino uint64 }

func fileInode(st *syscall.Stat_t) inode { return inode{uint64(st.Dev), st.Ino} }

type candidate struct {
	inode        inode
	mtime, ctime int64
}

func (d *ShmDir) lstat(rel string, st *syscall.Stat_t) error {
	fi, err := d.root.Lstat(rel)
	if err != nil {
		return err
	}
	s, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no stat_t")
	}
	*st = *s
	return nil
}

// orphanCandidates lists files of the directory that may be reclaimed if
// nothing uses them: see the rule above; keyed by the relative name.
func (d *ShmDir) orphanCandidates(before time.Time) (map[string]candidate, error) {
	uid := uint32(os.Geteuid())
	out := map[string]candidate{}
	err := fs.WalkDir(d.root.FS(), ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // vanished meanwhile, or unreadable: leave it
		}
		if p != "." && strings.HasPrefix(de.Name(), ".") {
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !de.Type().IsRegular() {
			return nil // directories are walked; symlinks, FIFOs, devices are not ours
		}
		fi, err := de.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != uid || st.Nlink != 1 || fi.Mode().Perm()&0o077 != 0 {
			return nil
		}
		mt, ct := st.Mtim.Nano(), st.Ctim.Nano()
		if max(mt, ct) > before.UnixNano() {
			return nil
		}
		out[filepath.FromSlash(p)] = candidate{inode: fileInode(st), mtime: mt, ctime: ct}
		return nil
	})
	return out, err
}

// openInodes returns the files that processes the sidecar may inspect
// have open or mapped, from /proc: a second line of defence behind the
// kernel's lease check. Processes it may not inspect are skipped.
func openInodes() map[inode]bool {
	used := map[inode]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err == nil {
			_ = procInodes(filepath.Join("/proc", p.Name()), used)
		}
	}
	return used
}

// procInodes adds the files process dir (/proc/<pid>) has mapped or open.
func procInodes(dir string, used map[inode]bool) error {
	maps, err := os.ReadFile(filepath.Join(dir, "maps"))
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// address perms offset dev inode [path]; dev is major:minor in hex.
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[4] == "0" {
			continue
		}
		ma, mi, ok := strings.Cut(f[3], ":")
		if !ok {
			continue
		}
		major, err1 := strconv.ParseUint(ma, 16, 32)
		minor, err2 := strconv.ParseUint(mi, 16, 32)
		ino, err3 := strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		used[inode{unix.Mkdev(uint32(major), uint32(minor)), ino}] = true
	}
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return err
	}
	for _, fd := range fds {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(dir, "fd", fd.Name()), &st) == nil {
			used[fileInode(&st)] = true
		}
	}
	return nil
}
