package pipeline_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
)

// childProducer is a producer process that begins one snapshot (admission,
// segment, fill), publishes it if FZ_PUBLISH=1, prints "SEGMENT <name>" and
// waits to be killed: a simulation that dies with its segment in shared
// memory.
func childProducer() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: os.Getenv("FZ_URL")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := ingest.NewProducer(ctx, nc, ingest.ProducerOptions{ID: os.Getenv("FZ_PRODUCER_ID"), ShmDir: os.Getenv("FZ_SHM")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	i, _ := strconv.Atoi(os.Getenv("FZ_SPEC"))
	snap, err := p.Begin(ctx, specFor(i))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fillField(snap.Float32(), i, i)
	if os.Getenv("FZ_PUBLISH") == "1" {
		if _, err := snap.Publish(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println("SEGMENT", snap.Notification().Segment)
	time.Sleep(time.Hour)
	return 0
}

// startDoomedProducer runs childProducer and returns its segment's name
// once it has one, and the process to kill.
func startDoomedProducer(t *testing.T, url, shm, id string, spec int, publish bool) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FZ_TEST_PRODUCER=1", "FZ_URL="+url, "FZ_SHM="+shm, "FZ_PRODUCER_ID="+id,
		"FZ_SPEC="+strconv.Itoa(spec), "FZ_PUBLISH="+map[bool]string{true: "1", false: "0"}[publish])
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	seg := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "SEGMENT "); ok {
				seg <- s
			}
		}
		close(seg)
	}()
	select {
	case s, ok := <-seg:
		if !ok {
			t.Fatal("producer process ended without a segment")
		}
		return s, cmd
	case <-time.After(30 * time.Second):
		t.Fatal("producer process made no segment within 30s")
	}
	return "", nil
}

func exists(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, name))
	return err == nil
}

// Segments of producers that died are reclaimed by the sidecar once nothing
// can still need them; everything that might still be needed stays: a
// segment a queued (here: in-flight) notification names, one a live
// producer has mapped, the credentials file, hidden files, files others may
// open. The one named by a notification is reclaimed once that snapshot is
// stored and answered.
func TestReclaimOrphanedSegments(t *testing.T) {
	e := newEnv(t)
	e.Hang = true
	e.ReclaimAfter = 2 * time.Second
	e.DrainTimeout = 300 * time.Millisecond
	c := startChild(t, &e, "sidecar1.log")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// Died before publishing.
	unpublished, dead1 := startDoomedProducer(t, c.url, e.ShmDir, "doomed1", 0, false)
	// Died after publishing; its snapshot is stuck in the sink.
	published, dead2 := startDoomedProducer(t, c.url, e.ShmDir, "doomed2", 1, true)
	for {
		if _, ack := consumerState(t, c.url); ack >= 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the published snapshot never reached the sidecar")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, cmd := range []*exec.Cmd{dead1, dead2} {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	// Alive, with its segment mapped and not yet published.
	p := newProducer(t, c.url, e.ShmDir, nil)
	live, err := p.Begin(ctx, specFor(2))
	if err != nil {
		t.Fatal(err)
	}
	fillField(live.Float32(), 2, 2)
	// Written by a producer that died, in a subdirectory; closed.
	os.MkdirAll(filepath.Join(e.ShmDir, "sub"), 0o700)
	must(t, os.WriteFile(filepath.Join(e.ShmDir, "sub", "orphan.seg"), make([]byte, 4096), 0o600))
	// Open (read-only, not mapped) in another live process.
	must(t, os.WriteFile(filepath.Join(e.ShmDir, "held.seg"), make([]byte, 4096), 0o600))
	held, err := os.Open(filepath.Join(e.ShmDir, "held.seg"))
	must(t, err)
	holder := exec.Command("sleep", "60")
	holder.Stdin = held
	must(t, holder.Start())
	held.Close()
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	// Never reclaimed: the credentials file, hidden files, files that other
	// users could have open.
	auth := filepath.Join(e.ShmDir, ".fzsidecar-auth")
	if !exists(e.ShmDir, ".fzsidecar-auth") {
		must(t, os.WriteFile(auth, []byte("v=1\n"), 0o600))
	}
	must(t, os.WriteFile(filepath.Join(e.ShmDir, ".hidden"), []byte("x"), 0o600))
	must(t, os.WriteFile(filepath.Join(e.ShmDir, "shared.seg"), make([]byte, 4096), 0o644))
	os.Chmod(filepath.Join(e.ShmDir, "shared.seg"), 0o644) // whatever the umask

	gone := func(name string, within time.Duration) bool {
		deadline := time.Now().Add(within)
		for exists(e.ShmDir, name) {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(100 * time.Millisecond)
		}
		return true
	}
	if !gone(unpublished, 10*time.Second) {
		t.Errorf("segment %s of a producer that died before publishing was not reclaimed", unpublished)
	}
	if !gone(filepath.Join("sub", "orphan.seg"), 5*time.Second) {
		t.Error("orphaned segment in a subdirectory was not reclaimed")
	}
	time.Sleep(3 * time.Second) // several more sweeps
	for _, keep := range []string{published, live.Notification().Segment, "held.seg", ".fzsidecar-auth", ".hidden", "shared.seg"} {
		if !exists(e.ShmDir, keep) {
			t.Errorf("%s was removed, but it must stay", keep)
		}
	}
	if t.Failed() {
		return
	}

	// The stuck snapshot is stored after a restart; its result goes to a
	// producer that is gone, so its segment is orphaned now and reclaimed.
	c.stop(t)
	e.Hang = false
	c = startChild(t, &e, "sidecar2.log")
	t0 := time.Now()
	if !gone(published, 15*time.Second) {
		t.Errorf("segment %s of a dead producer's answered snapshot was not reclaimed", published)
	}
	t.Logf("restart to reclaiming the answered snapshot's segment: %v", time.Since(t0).Round(time.Millisecond))
	if created, _ := readJournal(e.StoreDir); created["run1/pres/0.fz"] != 1 {
		t.Errorf("the dead producer's published snapshot: stored %d times, want 1 (%v)", created["run1/pres/0.fz"], created)
	}
	// The live producer is unaffected.
	pd, err := live.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.Wait(ctx); err != nil {
		t.Fatalf("live producer's snapshot: %v", err)
	}
	if !exists(e.ShmDir, ".fzsidecar-auth") || !exists(e.ShmDir, "shared.seg") {
		t.Error("a file that must stay was removed")
	}
	c.stop(t)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A producer that dies right after its admission holds the budget only for
// the lease (default one minute, was ten): a producer blocked behind it is
// admitted once the lease runs out.
func TestDeadAdmissionFreedByLease(t *testing.T) {
	if ingest.DefaultLeaseTTL > time.Minute {
		t.Errorf("default lease %v: one dead admission could starve every producer that long", ingest.DefaultLeaseTTL)
	}
	e := newEnv(t)
	e.Budget = 300_000 // one snapshot of specFor (245760 bytes) at a time
	url := runInProcess(t, e, func(c *sidecarConfig) { c.Receiver.LeaseTTL = time.Second })
	_, doomed := startDoomedProducer(t, url, e.ShmDir, "doomed3", 0, false)
	doomed.Process.Kill()
	doomed.Wait()
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	s, pd := publishOne(ctx, p, specFor(1), 1)
	if s.err != nil {
		t.Fatalf("blocked behind a dead producer's admission: %v", s.err)
	}
	t.Logf("admitted %v after the dead producer's admission (lease 1s)", time.Since(t0).Round(time.Millisecond))
	if s.res, s.err = pd.Wait(ctx); s.err != nil {
		t.Fatal(s.err)
	}
}
