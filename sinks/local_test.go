package sinks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/miniotest"
)

func TestMain(m *testing.M) {
	if os.Getenv("FZ_SINKS_HELPER") != "" {
		os.Exit(helperMain())
	}
	code := m.Run()
	miniotest.StopShared()
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openLocalT(t *testing.T, dir string) Sink {
	t.Helper()
	s, err := Open(context.Background(), dir, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocalConformance(t *testing.T) {
	testSink(t, func(t *testing.T) Sink { return openLocalT(t, t.TempDir()) })
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, u := range []string{dir, "file://" + dir, "file://localhost" + dir} {
		s, err := Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if s.String() != "file://"+dir {
			t.Errorf("Open(%q).String() = %q", u, s)
		}
	}
	f := filepath.Join(dir, "afile")
	os.WriteFile(f, nil, 0o644)
	for u, want := range map[string]string{
		"":              "empty sink URL",
		"ftp://x/y":     "unknown scheme",
		"file://host/x": "must be local",
		"file://":       "no path",
		f:               "is a file",
		"s3://":         "no bucket",
		"s3://b/../x":   "prefix",
		"s3://b/ok/a b": "prefix",
	} {
		t.Setenv("AWS_ACCESS_KEY_ID", "x")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
		_, err := Open(ctx, u)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", u, err, want)
		}
		// The URL's own mistakes are ErrBadURL (libfz: FZ_EINVAL); a path
		// that is a file is a storage problem.
		if bad := errors.Is(err, ErrBadURL); bad != (u != f) {
			t.Errorf("Open(%q): errors.Is(ErrBadURL) = %v", u, bad)
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, err := Open(ctx, "s3://bucket"); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") || errors.Is(err, ErrBadURL) {
		t.Errorf("Open(s3) without credentials = %v", err)
	}
}

func TestLocalLayoutOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := openLocalT(t, dir)
	blob := blobOf(9, 777)
	if err := s.Put(context.Background(), Key{"r1", "temp", 42}, blob, sampleMeta()); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "r1", "temp", "000000000042.fz")
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("blob not stored byte for byte at %s: %v", p, err)
	}
	sc, err := os.ReadFile(p + ".json")
	if err != nil || !strings.Contains(string(sc), `"dtype": "f32"`) {
		t.Fatalf("sidecar %s.json: %v\n%s", p, err, sc)
	}
	des, _ := os.ReadDir(filepath.Dir(p))
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if fmt.Sprint(names) != "[.lock 000000000042.fz 000000000042.fz.json]" {
		t.Errorf("directory holds %v", names)
	}
}

// TestLocalConflictSameCRC: two blobs of one size and one CRC32C but
// different bytes are a conflict, not a repeat. Containers are such pairs
// when only their header differs (it ends in its own CRC32C, and a CRC over
// data followed by its CRC always reaches the same state).
func TestLocalConflictSameCRC(t *testing.T) {
	ctx := context.Background()
	s := openLocalT(t, t.TempDir())
	withCRC := func(seed uint64) []byte {
		head := blobOf(seed, 88)
		b := binary.LittleEndian.AppendUint32(head, CRC32C(head))
		return append(b, blobOf(99, 1000)...)
	}
	a, b := withCRC(1), withCRC(2)
	if bytes.Equal(a, b) || CRC32C(a) != CRC32C(b) {
		t.Fatalf("test blobs: equal %v, CRC32C %08x %08x: want different bytes, one CRC", bytes.Equal(a, b), CRC32C(a), CRC32C(b))
	}
	k := Key{"r", "v", 1}
	if err := s.Put(ctx, k, a, Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, k, a, Meta{}); err != nil {
		t.Fatalf("identical Put: %v", err)
	}
	if err := s.Put(ctx, k, b, Meta{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put of other bytes with the same size and CRC32C: %v, want a conflict", err)
	}
	if got, _, err := s.Get(ctx, k); err != nil || !bytes.Equal(got, a) {
		t.Fatalf("stored blob changed (err %v)", err)
	}
}

func TestLocalCorruptBlob(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openLocalT(t, dir)
	k := Key{"r", "v", 5}
	blob := blobOf(10, 4096)
	if err := s.Put(ctx, k, blob, Meta{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "r", "v", "000000000005.fz")
	bad := bytes.Clone(blob)
	bad[1000] ^= 0x40
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Get(ctx, k)
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Object != p || !strings.Contains(err.Error(), p) {
		t.Fatalf("Get of a corrupt blob = %v, want a *ChecksumError naming %s", err, p)
	}
	// Truncation is caught by size before reading.
	os.WriteFile(p, blob[:100], 0o644)
	if _, _, err := s.Get(ctx, k); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("Get of a truncated blob = %v", err)
	}
	// A corrupt sidecar is reported, and does not hide other entries.
	os.WriteFile(p, blob, 0o644)
	os.WriteFile(p+".json", []byte(`{"format":1,"meta":{"stored_bytes":`), 0o644)
	if _, _, err := s.Get(ctx, k); err == nil || !strings.Contains(err.Error(), "sidecar") {
		t.Fatalf("Get with a corrupt sidecar = %v", err)
	}
	if err := s.Put(ctx, Key{"r", "v", 6}, blob, Meta{}); err != nil {
		t.Fatal(err)
	}
	es, err := s.List(ctx, Filter{})
	if err != nil || len(es) != 1 || es[0].Key.Step != 6 {
		t.Fatalf("List with one corrupt sidecar = %v, %v", es, err)
	}
}

// Every crash point of a Put leaves the key either absent or complete. The
// states before the commit (the blob's rename) are: temp files only, or an
// orphan sidecar plus temp files. Build them by hand and check that the
// catalog ignores them and that a later Put completes cleanly.
func TestLocalCrashLeftovers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openLocalT(t, dir)
	k := Key{"r", "v", 1}
	vd := filepath.Join(dir, "r", "v")
	os.MkdirAll(vd, 0o755)
	os.WriteFile(filepath.Join(vd, ".tmp-deadbeef"), []byte("half a blob"), 0o644)
	orphan, _ := encodeSidecar(Meta{Stored: 3, CRC32C: 1})
	os.WriteFile(filepath.Join(vd, "000000000001.fz.json"), orphan, 0o644)

	if es, err := s.List(ctx, Filter{}); err != nil || len(es) != 0 {
		t.Fatalf("List sees crash leftovers: %v, %v", es, err)
	}
	if _, _, err := s.Get(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before any committed Put = %v", err)
	}
	blob := blobOf(11, 500)
	if err := s.Put(ctx, k, blob, Meta{}); err != nil {
		t.Fatal(err)
	}
	got, m, err := s.Get(ctx, k)
	if err != nil || !bytes.Equal(got, blob) || m.Stored != 500 {
		t.Fatalf("Get after Put over leftovers: %v %+v", err, m)
	}
	if _, err := os.Stat(filepath.Join(vd, ".tmp-deadbeef")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file not cleaned up: %v", err)
	}

	// A blob someone copied in by hand, without sidecar: not listed, Get
	// says why, and a Put of the same bytes adopts it.
	hand := filepath.Join(vd, "000000000002.fz")
	os.WriteFile(hand, blob, 0o644)
	if _, _, err := s.Get(ctx, Key{"r", "v", 2}); err == nil || !strings.Contains(err.Error(), "no sidecar") {
		t.Fatalf("Get of a hand-copied blob = %v", err)
	}
	if err := s.Put(ctx, Key{"r", "v", 2}, blobOf(12, 500), Meta{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put of other bytes over a hand-copied blob = %v", err)
	}
	if err := s.Put(ctx, Key{"r", "v", 2}, blob, Meta{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, Key{"r", "v", 2}); err != nil {
		t.Fatal(err)
	}
}

// assertNothingVisible checks that a failed Put left no trace: no entry,
// no temp file, no sidecar.
func assertNothingVisible(t *testing.T, s Sink, root string) {
	t.Helper()
	if es, err := s.List(context.Background(), Filter{}); err != nil || len(es) != 0 {
		t.Errorf("after a failed Put, List = %v, %v", es, err)
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != lockName {
			t.Errorf("after a failed Put, %s exists", p)
		}
		return nil
	})
}

// Disk full, simulated at the file layer: writes fail with ENOSPC after a
// few bytes, as they would on a full filesystem.
func TestLocalDiskFullInjected(t *testing.T) {
	dir := t.TempDir()
	s := openLocalT(t, dir)
	for _, failAt := range []int{0, 1} { // blob write, sidecar write
		calls := 0
		writeHook = func(f *os.File, b []byte) (int, error) {
			calls++
			if calls > failAt {
				n, _ := f.Write(b[:len(b)/2])
				return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
			}
			return f.Write(b)
		}
		err := s.Put(context.Background(), Key{"r", "v", 1}, blobOf(13, 100000), Meta{})
		writeHook = nil
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left") || !strings.Contains(err.Error(), "000000000001.fz") {
			t.Fatalf("failing write %d: Put = %v, want ENOSPC naming the object", failAt, err)
		}
		assertNothingVisible(t, s, dir)
	}
}

// Disk full for real: a 1 MiB tmpfs. Needs mount rights (root in most CI
// containers); the injected test above covers the rest.
func TestLocalDiskFullTmpfs(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "fztest", dir).CombinedOutput(); err != nil {
		skiplog.Skipf(t, "cannot mount a tmpfs here (%v: %s); the injected-fault test covers disk full", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	s := openLocalT(t, dir)
	ctx := context.Background()
	small := blobOf(14, 300<<10)
	if err := s.Put(ctx, Key{"r", "v", 1}, small, Meta{}); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, Key{"r", "v", 2}, blobOf(15, 900<<10), Meta{})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put onto a full tmpfs = %v, want ENOSPC", err)
	}
	es, err := s.List(ctx, Filter{})
	if err != nil || len(es) != 1 || es[0].Key.Step != 1 {
		t.Fatalf("after disk full, List = %v, %v", es, err)
	}
	des, _ := os.ReadDir(filepath.Join(dir, "r", "v"))
	for _, de := range des {
		if strings.HasPrefix(de.Name(), "000000000002") || strings.HasPrefix(de.Name(), tmpPrefix) {
			t.Errorf("disk full left %s behind", de.Name())
		}
	}
	if got, _, err := s.Get(ctx, Key{"r", "v", 1}); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("earlier blob damaged: %v", err)
	}
}

// Permission denied: a read-only sink directory. Root ignores permission
// bits, so as root the Put runs in a child process as user nobody.
func TestLocalPermissionDenied(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "sink")
	os.MkdirAll(filepath.Join(root, "r"), 0o755)
	os.Chmod(root, 0o555)
	os.Chmod(filepath.Join(root, "r"), 0o555)
	t.Cleanup(func() { os.Chmod(root, 0o755); os.Chmod(filepath.Join(root, "r"), 0o755) })
	var err error
	if os.Geteuid() == 0 {
		// nobody must reach the sink and run the test binary, which lives
		// in a 0700 build directory: copy it next to the sink.
		os.Chmod(dir, 0o755)
		os.Chmod(filepath.Dir(dir), 0o755)
		self, _ := os.Executable()
		exe := filepath.Join(dir, "sinks.test")
		b, rerr := os.ReadFile(self)
		if rerr != nil || os.WriteFile(exe, b, 0o755) != nil {
			t.Fatalf("copying the test binary: %v", rerr)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "FZ_SINKS_HELPER=put", "FZ_SINKS_ROOT="+root)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, runErr := cmd.CombinedOutput()
		if runErr != nil && !strings.Contains(string(out), "helper:") {
			t.Fatalf("helper as nobody did not run: %v\n%s", runErr, out)
		}
		if !strings.Contains(string(out), "helper: put error:") {
			t.Fatalf("Put as nobody into a read-only dir succeeded:\n%s", out)
		}
		err = errors.New(string(out))
	} else {
		err = openLocalT(t, root).Put(context.Background(), Key{"r", "v", 1}, []byte("x"), Meta{})
		if err == nil {
			t.Fatal("Put into a read-only directory succeeded")
		}
	}
	if !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), filepath.Join(root, "r", "v")) {
		t.Fatalf("error does not say permission denied on the object's path: %v", err)
	}
	assertNothingVisible(t, openLocalT(t, root), root)
}

// A writer process SIGKILLed at random moments of its Puts: after each
// kill, every listed entry must read back with a good checksum, and the
// interrupted key must be either absent or complete; a new writer then
// carries on (the dead writer's flock is gone with it).
func TestLocalKilledWriter(t *testing.T) {
	root := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	next := uint64(0)
	interrupted := 0 // rounds killed with a Put half-done
	rounds := 0
	// At least 6 kills, more (up to 30) until one lands mid-Put.
	for round := 0; round < 6 || interrupted == 0 && round < 30; round++ {
		rounds++
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), "FZ_SINKS_HELPER=putloop", "FZ_SINKS_ROOT="+root, fmt.Sprintf("FZ_SINKS_FROM=%d", next))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill at different points of a Put of a few MiB, counted from
		// when the writer starts putting: counted from the process start,
		// a loaded machine's slow start-up made every kill land before the
		// first Put.
		ready := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			ready <- line
			io.Copy(io.Discard, stdout)
		}()
		select {
		case line := <-ready:
			if line != putloopReady+"\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: writer said %q, want %q", round, line, putloopReady)
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: writer not putting after 60 s", round)
		}
		time.Sleep(time.Duration(20+round%6*17) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()

		if des, _ := os.ReadDir(filepath.Join(root, "r", "v")); true {
			for _, de := range des {
				if strings.HasPrefix(de.Name(), tmpPrefix) {
					interrupted++
					break
				}
			}
		}
		s := openLocalT(t, root)
		es, err := s.List(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got, _, err := s.Get(ctx, e.Key)
			if err != nil {
				t.Fatalf("round %d: listed %v does not read back: %v", round, e.Key, err)
			}
			if !bytes.Equal(got, killBlob(e.Key.Step)) {
				t.Fatalf("round %d: %v holds other bytes", round, e.Key)
			}
		}
		if uint64(len(es)) < next {
			t.Fatalf("round %d: %d entries, but %d were committed before", round, len(es), next)
		}
		next = uint64(len(es))
		// The step the writer was killed in is absent; storing it works.
		if err := s.Put(ctx, Key{"r", "v", next}, killBlob(next), Meta{}); err != nil {
			t.Fatalf("round %d: Put after a killed writer: %v", round, err)
		}
		next++
	}
	t.Logf("%d steps stored across %d kills, %d of them in the middle of writing a blob", next, rounds, interrupted)
	if interrupted == 0 {
		t.Error("no kill landed in the middle of a Put: the test checked nothing interesting")
	}
}

// putloopReady is what the putloop helper prints before its first Put.
const putloopReady = "putloop: putting"

func killBlob(step uint64) []byte { return blobOf(1000+step, 3<<20+int(step)) }

// helperMain runs in a child process (see TestLocalPermissionDenied and
// TestLocalKilledWriter).
func helperMain() int {
	if os.Getenv("FZ_SINKS_HELPER") == "s3put" {
		// Slow parts (one at a time, small) so the test can catch it mid-way.
		s, err := Open(context.Background(), os.Getenv("FZ_SINKS_ROOT"), WithLogger(quiet), WithS3(S3Config{PartSize: 5 << 20, Threads: 1}))
		if err == nil {
			err = s.Put(context.Background(), Key{"r", "v", 1}, s3KillBlob(), Meta{})
		}
		if err != nil {
			fmt.Println("helper: put error:", err)
			return 1
		}
		fmt.Println("helper: put ok")
		return 0
	}
	if os.Getenv("FZ_SINKS_HELPER") == "putloop" {
		s, err := Open(context.Background(), os.Getenv("FZ_SINKS_ROOT"), WithLogger(quiet))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		var from uint64
		fmt.Sscan(os.Getenv("FZ_SINKS_FROM"), &from)
		fmt.Println(putloopReady)
		for step := from; ; step++ {
			if err := s.Put(context.Background(), Key{"r", "v", step}, killBlob(step), Meta{}); err != nil {
				fmt.Println(err)
				return 1
			}
		}
	}
	s, err := Open(context.Background(), os.Getenv("FZ_SINKS_ROOT"), WithLogger(quiet))
	if err == nil {
		err = s.Put(context.Background(), Key{"r", "v", 1}, []byte("x"), Meta{})
	}
	if err != nil {
		fmt.Printf("helper: put error: %v\n", err)
		return 1
	}
	fmt.Println("helper: put ok")
	return 0
}

func TestCancelledContext(t *testing.T) {
	s := openLocalT(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, Key{"r", "v", 1}, []byte("x"), Meta{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context = %v", err)
	}
}
