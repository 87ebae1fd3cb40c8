package ingest

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A shm directory is trusted only if no other user can replace what is in
// it (docs/PROTOCOL.md §2): in a directory others may write to, anyone can
// delete a producer's published segment and put their own file under its
// name before the sidecar maps it (forged data in the victim's snapshot),
// or plant a credentials file. The rule, the same in every binding:
//
//   - the directory is not writable by others (no o+w, sticky or not);
//   - it is owned by this user or root, or it is a group-shared directory
//     (group-writable and setgid: the documented `mode 2770` setup, where
//     the group's members trust each other);
//   - every directory above it is owned by this user or root or is
//     group-shared, and is not o+w unless sticky (/dev/shm, /tmp), so
//     nobody else can rename the directory away and put another in place;
//   - a symbolic link on the path is owned by this user or root (another
//     user could point it elsewhere later).
//
// Checks look at what was opened (os.Root), so a swap between the check and
// the use is caught, and the sidecar then reaches files only through that
// handle.

// openSafeShmDir creates dir (mode 0700, with missing parents) if needed,
// checks it as above and opens it. abs is its cleaned absolute path.
func openSafeShmDir(dir string) (abs string, root *os.Root, err error) {
	abs, err = filepath.Abs(dir)
	if err != nil {
		return "", nil, fmt.Errorf("shm dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", nil, fmt.Errorf("create shm dir: %w", err)
	}
	euid := os.Geteuid()
	real, err := checkShmDirPath(abs, euid)
	if err != nil {
		return "", nil, err
	}
	before, err := os.Stat(real)
	if err != nil {
		return "", nil, fmt.Errorf("shm dir %s: %w", abs, err)
	}
	root, err = os.OpenRoot(real)
	if err != nil {
		return "", nil, fmt.Errorf("open shm dir: %w", err)
	}
	opened, err := root.Stat(".")
	if err == nil && !os.SameFile(before, opened) {
		err = fmt.Errorf("shm dir %s was replaced while it was being checked: someone is changing the path; expected a directory only you control", abs)
	}
	if err == nil {
		err = checkShmDirMode(abs, opened, euid, false)
	}
	if err != nil {
		root.Close()
		return "", nil, err
	}
	return abs, root, nil
}

// checkShmDirPath checks the symbolic links on abs and the directories
// above the one it names; it returns abs with the links resolved.
func checkShmDirPath(abs string, euid int) (string, error) {
	// Links on the path as given: each prefix, lstat'ed.
	p := "/"
	for _, el := range strings.Split(strings.TrimPrefix(abs, "/"), "/") {
		if el == "" {
			continue
		}
		p = filepath.Join(p, el)
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("shm dir %s: %w", abs, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if uid := fileUID(fi); uid != euid && uid != 0 {
				return "", fmt.Errorf("shm dir %s: %s is a symbolic link owned by %s, who could point it elsewhere: "+
					"expected a path of links owned by you or root (use the directory the link points at)", abs, p, userDesc(uid))
			}
		}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("shm dir %q: %w", abs, err)
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return "", fmt.Errorf("shm dir %s: %w", abs, err)
		}
		if err := checkShmDirMode(d, fi, euid, true); err != nil {
			return "", fmt.Errorf("shm dir %s: the directory above it: %w", abs, err)
		}
		if d == "/" || d == "." {
			break
		}
	}
	return real, nil
}

// checkShmDirMode applies the ownership and mode rule to one directory;
// above says it lies above the shm dir, where a sticky o+w directory (whose
// entries only their owners may rename) is fine.
func checkShmDirMode(path string, fi fs.FileInfo, euid int, above bool) error {
	if !fi.IsDir() {
		return fmt.Errorf("shm dir %s is not a directory (%v): expected a directory", path, fi.Mode().Type())
	}
	mode := fi.Mode()
	uid := fileUID(fi)
	desc := fmt.Sprintf("%s (owner %s, mode %04o)", path, userDesc(uid), unixPerm(mode))
	sticky := mode&fs.ModeSticky != 0
	if mode.Perm()&0o002 != 0 && !(above && sticky) {
		if above {
			return fmt.Errorf("%s is writable by every user and not sticky: anyone could move the shm dir away and put "+
				"their own in its place; expected a path whose directories only you or root can change", desc)
		}
		return fmt.Errorf("shm dir %s is writable by every user: another user could replace a published segment "+
			"(forging its data) or the credentials file; expected mode 0700 owned by you, or a shared group's "+
			"directory with mode 2770 (chmod o-w, or choose another --shm-dir)", desc)
	}
	groupShared := mode&fs.ModeSetgid != 0 && mode.Perm()&0o020 != 0
	if uid != euid && uid != 0 && !groupShared {
		what := "shm dir " + desc
		if above {
			what = desc
		}
		return fmt.Errorf("%s belongs to another user, who could replace what is in it, and is not a group-shared "+
			"directory: expected a directory owned by you (uid %d) or root, or one created for a shared group "+
			"with mode 2770 (group-writable, setgid)", what, euid)
	}
	return nil
}

// unixPerm is mode's permission bits with setuid/setgid/sticky as chmod
// writes them (04000, 02000, 01000).
func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

func fileUID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// userDesc is "uid N (name)", or "uid N" without a name.
func userDesc(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}
