package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/skiplog"
)

// otherUID is a user that is neither this process's nor root (QA's repro
// used qa2, uid 1002; any uid works for chown as root).
const otherUID, otherGID = 1002, 1002

// mkShmDir makes dir with exactly mode (whatever the umask) and owner.
func mkShmDir(t *testing.T, dir string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// refusesShmDir checks that the sidecar's directory opening, its
// credentials file and the Go producer's segment creation all refuse dir
// with an error naming it and saying why.
func refusesShmDir(t *testing.T, dir string, want ...string) {
	t.Helper()
	errs := map[string]error{}
	if d, err := OpenShmDir(dir); err == nil {
		d.Close()
		errs["OpenShmDir"] = nil
	} else {
		errs["OpenShmDir"] = err
	}
	_, errs["NewLocalAuth"] = NewLocalAuth(dir, Subjects{}, nil)
	if s, err := CreateSegment(dir, "p", 16); err == nil {
		s.Remove()
		errs["CreateSegment"] = nil
	} else {
		errs["CreateSegment"] = err
	}
	for what, err := range errs {
		if err == nil {
			t.Errorf("%s(%s) accepted a shm dir other users could change", what, dir)
			continue
		}
		for _, w := range append([]string{dir}, want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s(%s) error %q: expected it to mention %q", what, dir, err, w)
			}
		}
	}
}

func acceptsShmDir(t *testing.T, dir string) {
	t.Helper()
	d, err := OpenShmDir(dir)
	if err != nil {
		t.Fatalf("OpenShmDir(%s): %v", dir, err)
	}
	d.Close()
	la, err := NewLocalAuth(dir, Subjects{}, nil)
	if err != nil {
		t.Fatalf("NewLocalAuth(%s): %v", dir, err)
	}
	if err := la.WriteFile("nats://127.0.0.1:4222"); err != nil {
		t.Fatalf("WriteFile in %s: %v", dir, err)
	}
	s, err := CreateSegment(dir, "p", 16)
	if err != nil {
		t.Fatalf("CreateSegment(%s): %v", dir, err)
	}
	if filepath.Dir(s.Path()) != dir {
		t.Errorf("segment at %s: expected it in %s", s.Path(), dir)
	}
	s.Remove()
}

// QA (#27.4): another user who made /dev/shm/fzd with mode 777 first could
// swap a published segment for its own file and plant a credentials file.
func TestShmDirWritableByOthersRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky, 0o703} {
		dir := filepath.Join(t.TempDir(), "fzd")
		mkShmDir(t, dir, mode, -1, -1)
		// A credentials file already there changes nothing.
		os.WriteFile(filepath.Join(dir, LocalAuthFile), []byte("v=1\nuser=producer\npassword=x\n"), 0o600)
		refusesShmDir(t, dir, "writable by every user", "mode 0", "2770")
	}
	// Created by us: 0700, accepted.
	acceptsShmDir(t, filepath.Join(t.TempDir(), "new", "fzd"))
}

func TestShmDirOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		skiplog.Skipf(t, "needs root to chown a directory to another user (uid %d)", otherUID)
	}
	for _, mode := range []os.FileMode{0o700, 0o770, 0o755, 0o775 | os.ModeSticky} {
		dir := filepath.Join(t.TempDir(), "fzd")
		mkShmDir(t, dir, mode, otherUID, otherGID)
		refusesShmDir(t, dir, "uid 1002", "belongs to another user", "2770")
	}
	// The documented shared setup: another owner, a shared group, 2770.
	shared := filepath.Join(t.TempDir(), "fzd")
	mkShmDir(t, shared, 0o770|os.ModeSetgid, otherUID, otherGID)
	acceptsShmDir(t, shared)
	// ... but not with o+w.
	mkShmDir(t, shared, 0o777|os.ModeSetgid, otherUID, otherGID)
	refusesShmDir(t, shared, "writable by every user")
	// Root's directories are trusted.
	rootOwned := filepath.Join(t.TempDir(), "fzd")
	mkShmDir(t, rootOwned, 0o755, 0, 0)
	acceptsShmDir(t, rootOwned)
}

func TestShmDirPathTricksRefused(t *testing.T) {
	base := t.TempDir()
	// A directory above that anyone may rename entries of.
	open := filepath.Join(base, "open")
	mkShmDir(t, open, 0o777, -1, -1)
	refusesShmDir(t, filepath.Join(open, "fzd"), "above it", "not sticky")
	// Sticky above (like /dev/shm, /tmp): fine.
	sticky := filepath.Join(base, "sticky")
	mkShmDir(t, sticky, 0o777|os.ModeSticky, -1, -1)
	acceptsShmDir(t, filepath.Join(sticky, "fzd"))
	// A link of our own to a good directory: fine.
	good := filepath.Join(base, "good")
	mkShmDir(t, good, 0o700, -1, -1)
	own := filepath.Join(sticky, "ownlink")
	if err := os.Symlink(good, own); err != nil {
		t.Fatal(err)
	}
	acceptsShmDir(t, own)
	// A link to an o+w directory: what is opened is checked.
	bad := filepath.Join(base, "bad")
	mkShmDir(t, bad, 0o777, -1, -1)
	badLink := filepath.Join(sticky, "badlink")
	if err := os.Symlink(bad, badLink); err != nil {
		t.Fatal(err)
	}
	refusesShmDir(t, badLink, "writable by every user")
	if os.Geteuid() != 0 {
		skiplog.Skipf(t, "needs root to give a symbolic link to another user (uid %d)", otherUID)
	}
	// Another user's link (in sticky /dev/shm, say) to our own good
	// directory: they could point it elsewhere later.
	theirs := filepath.Join(sticky, "theirlink")
	if err := os.Symlink(good, theirs); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(theirs, otherUID, otherGID); err != nil {
		t.Fatal(err)
	}
	refusesShmDir(t, theirs, "symbolic link owned by uid 1002")
	// Another user's directory above, not group-shared.
	above := filepath.Join(base, "theirs")
	mkShmDir(t, above, 0o755, otherUID, otherGID)
	refusesShmDir(t, filepath.Join(above, "fzd"), "above it", "belongs to another user")
}
