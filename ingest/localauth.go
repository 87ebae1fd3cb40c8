package ingest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"
)

// Local trust (docs/PROTOCOL.md §1). On a shared node every local user can
// reach 127.0.0.1:4222, so a zero-config sidecar does not run an open
// server: its embedded server knows two users, the sidecar itself (all
// rights, a password that never leaves memory) and "producer" (only the
// subjects a producer needs), and the producer password is written to a
// file in the shm dir that only the sidecar's Unix user can read. Producers
// of that user find it there, so nothing has to be configured; everyone else
// cannot connect at all.

const (
	// LocalAuthFile is the credentials file's name inside the shm dir.
	LocalAuthFile = ".fzsidecar-auth"
	// ProducerUser is the restricted user producers log in as.
	ProducerUser = "producer"
	// SidecarUser is the sidecar's own user, with every permission.
	SidecarUser = "fzsidecar"

	localAuthVersion = "1"
	// passwordBytes of randomness per password (base64url, 43 characters).
	passwordBytes = 32
	// maxAuthFileBytes bounds what is read: the file is a few lines.
	maxAuthFileBytes = 64 << 10
)

// LocalCredentials are the contents of the credentials file.
type LocalCredentials struct {
	URL      string // where the sidecar's server listens
	User     string
	Password string
	Prefix   string // the sidecar's subject prefix
}

// LocalAuthPath is the credentials file of a shm dir.
func LocalAuthPath(shmDir string) string {
	if shmDir == "" {
		shmDir = DefaultShmDir
	}
	return filepath.Join(shmDir, LocalAuthFile)
}

// ReadLocalCredentials reads the credentials file of shmDir as a producer
// does. A missing file is not an error: it returns nil, nil (no local
// sidecar, or one with explicit authentication). A file this process must
// not trust — not a regular file, not owned by its user, readable or
// writable by anyone else — is an error, as is one it cannot parse.
func ReadLocalCredentials(shmDir string) (*LocalCredentials, error) {
	path := LocalAuthPath(shmDir)
	c, err := readLocalCredentials(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// readLocalCredentials opens path without following a symbolic link (one
// could point at any file of ours) and without blocking on a FIFO, then
// checks what it opened, not what the name pointed at a moment earlier.
func readLocalCredentials(path string) (*LocalCredentials, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("credentials file %s: %w", path, os.ErrNotExist)
		}
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("credentials file %s is a symbolic link: expected the regular file fzsidecar serve writes", path)
		}
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("credentials file %s is not a regular file (%v): expected the file fzsidecar serve writes", path, st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("credentials file %s belongs to uid %d, not to this process's user (uid %d): "+
			"local credentials only serve producers of the sidecar's own user; give credentials explicitly "+
			"(docs/PROTOCOL.md §1)", path, sys.Uid, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("credentials file %s has mode %04o: other users may have read it, so it is not trusted "+
			"(expected 0600; restart fzsidecar serve to write a new one)", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxAuthFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	if len(b) > maxAuthFileBytes {
		return nil, fmt.Errorf("credentials file %s is larger than %d bytes: expected a few key=value lines", path, maxAuthFileBytes)
	}
	c, err := parseLocalCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	return c, nil
}

// parseLocalCredentials reads key=value lines; # starts a comment line and
// unknown keys are ignored, so later versions may add keys.
func parseLocalCredentials(b []byte) (*LocalCredentials, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxAuthFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d %q: expected key=value", n, line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if v := kv["v"]; v != localAuthVersion {
		return nil, fmt.Errorf("version v=%q: expected v=%s (written by a different fzsidecar version?)", v, localAuthVersion)
	}
	c := &LocalCredentials{URL: kv["url"], User: kv["user"], Password: kv["password"], Prefix: kv["prefix"]}
	if c.User == "" || c.Password == "" {
		return nil, errors.New("user or password missing: expected user=... and password=... lines")
	}
	return c, nil
}

// LocalAuth is the embedded server's zero-config security: the two users
// and the credentials file. NewLocalAuth prepares the passwords; the server
// takes Users; once the server listens, WriteFile tells producers where.
type LocalAuth struct {
	shmDir   string
	subjects Subjects
	sidecar  string // the sidecar's password: memory only
	producer string
	// Reused says the producer password came from an existing file, so
	// producers of a previous run keep working across the restart.
	Reused bool
}

// NewLocalAuth reuses the producer password of an existing credentials file
// in shmDir when the file is one this user can trust (its own regular file,
// mode 0600, readable); anything else is replaced by a fresh password, and
// why is logged: a file others could read may have leaked its password, and
// one someone else owns was not written by this sidecar. The sidecar's own
// password is always new.
func NewLocalAuth(shmDir string, sub Subjects, log *slog.Logger) (*LocalAuth, error) {
	if log == nil {
		log = slog.Default()
	}
	if shmDir == "" {
		shmDir = DefaultShmDir
	}
	// Refuse at once a shm dir other users could change: they could plant
	// or replace the credentials file and segments (shmdirsafe.go).
	_, root, err := openSafeShmDir(shmDir)
	if err != nil {
		return nil, err
	}
	root.Close()
	a := &LocalAuth{shmDir: shmDir, subjects: sub}
	if a.sidecar, err = newPassword(); err != nil {
		return nil, err
	}
	path := LocalAuthPath(shmDir)
	old, err := readLocalCredentials(path)
	switch {
	case err == nil && old.User == ProducerUser && validPassword(old.Password):
		a.producer, a.Reused = old.Password, true
		return a, nil
	case err == nil:
		log.Warn("credentials file not reused: unexpected user or password format; writing a new one", "file", path)
	case errors.Is(err, os.ErrNotExist):
	default:
		log.Warn("credentials file not reused; writing a new one (producers that do not re-read it when reconnecting must restart)", "reason", err.Error())
	}
	if a.producer, err = newPassword(); err != nil {
		return nil, err
	}
	return a, nil
}

func newPassword() (string, error) {
	var b [passwordBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func validPassword(p string) bool {
	b, err := base64.RawURLEncoding.DecodeString(p)
	return err == nil && len(b) == passwordBytes
}

// SidecarConn is o logged in as the sidecar, with its own inbox prefix.
func (a *LocalAuth) SidecarConn(o ConnOptions) ConnOptions {
	o.User, o.Password, o.InboxPrefix = SidecarUser, a.sidecar, SidecarInboxPrefix
	return o
}

// SidecarInboxPrefix is the sidecar's reply-subject prefix under local
// trust: producers may subscribe to _INBOX.> (their own replies), and the
// notifications the sidecar fetches arrive on its inbox, so its inbox must
// lie elsewhere.
const SidecarInboxPrefix = "_FZSIDECAR_INBOX"

// ProducerPassword is the password written to the credentials file.
func (a *LocalAuth) ProducerPassword() string { return a.producer }

// Users are the embedded server's two users.
func (a *LocalAuth) Users() []*server.User {
	return []*server.User{
		{Username: SidecarUser, Password: a.sidecar},
		{Username: ProducerUser, Password: a.producer, Permissions: ProducerPermissions(a.subjects)},
	}
}

// ProducerPermissions are what a producer may do with prefix P: announce
// snapshots, ask for and give back budget, ask for status, receive results
// and look up a missed one. Everything else — the rest of the JetStream API
// (purging, deleting the consumer), publishing results — is denied.
func ProducerPermissions(sub Subjects) *server.Permissions {
	p := sub.prefix()
	res := sub.ResultStream()
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			p + ".snap.*", sub.Admit(), sub.Release(), sub.Status(),
			"$JS.API.DIRECT.GET." + res + ".>", "$JS.API.STREAM.INFO." + res,
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{sub.ResultWildcard(), "_INBOX.>"}},
	}
}

// WriteFile writes the credentials file for a server reachable at
// clientURL: mode 0600 in the shm dir (created 0700 if missing, refused if
// other users could change it), through a
// new temporary file renamed into place, so a reader never sees half a
// file and whatever was at the name before (another user's file, a link)
// is replaced, not written through.
func (a *LocalAuth) WriteFile(clientURL string) error {
	_, root, err := openSafeShmDir(a.shmDir)
	if err != nil {
		return fmt.Errorf("credentials file: %w", err)
	}
	defer root.Close()
	var body strings.Builder
	body.WriteString("# fzsidecar producer credentials; written by fzsidecar serve\n")
	fmt.Fprintf(&body, "v=%s\nurl=%s\nuser=%s\npassword=%s\nprefix=%s\n",
		localAuthVersion, loopbackURL(clientURL), ProducerUser, a.producer, a.subjects.prefix())
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	path := LocalAuthPath(a.shmDir)
	tmp := LocalAuthFile + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("write credentials file: %w", err)
	}
	_, err = f.WriteString(body.String())
	if err == nil {
		err = f.Chmod(0o600) // against a umask-independent surprise: exactly 0600
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("write credentials file %s: %w", path, err)
	}
	if err := root.Rename(tmp, LocalAuthFile); err != nil {
		root.Remove(tmp)
		// Another user's file in a sticky directory, or a directory at
		// the name: only a person can sort that out.
		return fmt.Errorf("replace credentials file %s: %w (remove what is there, or choose another --shm-dir)", path, err)
	}
	return nil
}

// loopbackURL turns a listen-everywhere address (0.0.0.0, ::, no host)
// into one a local producer can dial.
func loopbackURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	host, port, err := net.SplitHostPort(p.Host)
	if err != nil {
		return u
	}
	if host == "" {
		p.Host = net.JoinHostPort("127.0.0.1", port)
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
		p.Host = net.JoinHostPort(host, port)
	}
	return p.String()
}

// withLocalCredentials fills user and password (and the URL, if none was
// given) from the shm dir's credentials file when o carries no credentials
// of its own. Without a file o is returned unchanged.
func (o ConnOptions) withLocalCredentials() (ConnOptions, error) {
	if o.ShmDir == "" || o.hasCredentials() {
		return o, nil
	}
	c, err := ReadLocalCredentials(o.ShmDir)
	if err != nil || c == nil {
		return o, err
	}
	o.User, o.Password = c.User, c.Password
	if o.URL == "" {
		o.URL = c.URL
	}
	return o, nil
}

// subjectProducer is the producer a notification's subject names, or "" if
// the subject is not P.snap.<valid id>. Results go to it, never to the
// producer the body names: permissions restrict what subject a client
// publishes on (the subject is what the server checks), so routing by the
// body would let anyone who may publish write into another producer's
// results.
func (r *Receiver) subjectProducer(subject string) string {
	if tok, ok := strings.CutPrefix(subject, r.cfg.Subjects.prefix()+".snap."); ok && ValidToken(tok) {
		return tok
	}
	return ""
}

// localUserInfo gives the user and password of the shm dir's credentials
// file as it is now, or the last ones read if it is gone or not
// trustworthy any more.
func localUserInfo(shmDir, user, password string) nats.UserInfoCB {
	var mu sync.Mutex
	return func() (string, string) {
		mu.Lock()
		defer mu.Unlock()
		if c, err := ReadLocalCredentials(shmDir); err == nil && c != nil {
			user, password = c.User, c.Password
		}
		return user, password
	}
}
