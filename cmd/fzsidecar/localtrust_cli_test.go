package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func publishArgs(e serveEnv, file string, step string, extra ...string) []string {
	return append(append([]string{"publish", "--shm-dir", e.shm}, extra...), "--run", "trust", "--var", "v",
		"--step", step, "--dtype", "f32", "--dims", "8x8", "--mode", "abs", "--eb", "0.1", file)
}

// Zero-config serve: producers of this user get in through the credentials
// file (URL included), anybody else is refused, the producer login cannot
// administer JetStream, and a restarted sidecar keeps the password.
func TestServeLocalTrust(t *testing.T) {
	e := newServeEnv(t)
	srv := e.serve(t)
	path := ingest.LocalAuthPath(e.shm)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", st, err)
	}
	c1, err := ingest.ReadLocalCredentials(e.shm)
	if err != nil || c1.URL != e.url() || c1.User != ingest.ProducerUser || c1.Prefix != "fz" {
		t.Fatalf("credentials %+v %v", c1, err)
	}
	file := filepath.Join(t.TempDir(), "f.raw")
	os.WriteFile(file, make([]byte, 4*64), 0o644)
	// No --nats-url, no credentials: both come from the file.
	p := start(t, publishArgs(e, file, "1")...)
	if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stdout(), "stored trust/v/000000000001.fz") {
		t.Fatalf("zero-config publish: exit %d: %s %s", code, p.stdout(), p.stderr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Without credentials (another user cannot read the file): refused.
	if _, err := ingest.Connect(ctx, ingest.ConnOptions{URL: e.url()}); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("anonymous connect: %v", err)
	}
	p = start(t, publishArgs(e, file, "2", "--nats-url", e.url(), "--shm-dir", t.TempDir())...)
	if code := p.wait(t, 60*time.Second); code != 1 || !strings.Contains(p.stderr(), "no credentials file") {
		t.Errorf("publish without credentials: exit %d: %s", code, p.stderr())
	}
	// With the producer's: no JetStream administration.
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{ShmDir: e.shm})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	actx, acancel := context.WithTimeout(ctx, time.Second)
	err = js.DeleteConsumer(actx, "FZ_SNAPSHOTS", "fzsidecar")
	acancel()
	if err == nil {
		t.Fatal("the producer login deleted the consumer")
	}
	actx, acancel = context.WithTimeout(ctx, time.Second)
	err = js.DeleteStream(actx, "FZ_SNAPSHOTS")
	acancel()
	if err == nil {
		t.Fatal("the producer login deleted the stream")
	}
	nc.Close()
	if strings.Contains(srv.stderr(), "consumer is gone") {
		t.Errorf("consumer disappeared:\n%s", srv.stderr())
	}

	// SIGKILL and restart: same password, producers keep working.
	srv.kill()
	srv = e.serve(t)
	c2, err := ingest.ReadLocalCredentials(e.shm)
	if err != nil || c2.Password != c1.Password {
		t.Fatalf("password changed across a restart: %v", err)
	}
	if !srv.stderrHas("reused=true", 30*time.Second) { // logged before the ready line, read separately
		t.Errorf("restart did not say it reused the credentials:\n%s", srv.stderr())
	}
	p = start(t, publishArgs(e, file, "3")...)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("publish after restart: exit %d: %s", code, p.stderr())
	}

	// Another Unix user (needs root to become one) cannot read the file,
	// and without it cannot connect (the anonymous connect above).
	if os.Getuid() == 0 {
		cat := exec.Command("cat", path)
		cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cat.CombinedOutput(); err == nil {
			t.Errorf("user nobody read the credentials file: %s", out)
		}
	}
}

// A consumer deleted by an administrator is recreated (and logged), and
// snapshots flow again; /healthz reports the consumer.
func TestServeRecreatesDeletedConsumer(t *testing.T) {
	e := newServeEnv(t)
	t.Setenv("FZ_NATS_TOKEN", "adm1n") // explicit auth: the test is the administrator
	srv := e.serve(t)
	if _, err := os.Stat(ingest.LocalAuthPath(e.shm)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("credentials file written although auth was configured: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: e.url(), Token: "adm1n"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteConsumer(ctx, "FZ_SNAPSHOTS", "fzsidecar"); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(srv.stderr(), "snapshot consumer recreated") {
		if ctx.Err() != nil {
			t.Fatalf("consumer not recreated:\n%s", srv.stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	m := metricsURL.FindStringSubmatch(srv.stdout())
	if m == nil {
		t.Fatalf("no metrics URL: %s", srv.stdout())
	}
	code, body := httpGet(t, strings.TrimSuffix(m[1], "/metrics")+"/healthz")
	var h struct{ Status, Consumer string }
	if json.Unmarshal([]byte(body), &h); code != 200 || h.Status != "ok" || h.Consumer != "ok" {
		t.Errorf("healthz after recreation: %d %s", code, body)
	}
	if _, page := httpGet(t, m[1]); !strings.Contains(page, "fzsidecar_consumer_recreated_total 1") ||
		!strings.Contains(page, "fzsidecar_consumer_missing 0") {
		t.Errorf("consumer metrics after one recreation:\n%s", page)
	}
	file := filepath.Join(t.TempDir(), "f.raw")
	os.WriteFile(file, make([]byte, 4*64), 0o644)
	p := start(t, publishArgs(e, file, "1", "--nats-url", e.url())...)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("publish after recreation: exit %d: %s", code, p.stderr())
	}

	// While it cannot be recreated (another stream holds the subjects),
	// /healthz fails and says why.
	if err := js.DeleteStream(ctx, "FZ_SNAPSHOTS"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUAT", Subjects: []string{"fz.snap.>"}}); err != nil {
		t.Fatal(err)
	}
	health := func() (int, string) {
		code, body := httpGet(t, strings.TrimSuffix(m[1], "/metrics")+"/healthz")
		h.Consumer = ""
		json.Unmarshal([]byte(body), &h)
		return code, h.Consumer
	}
	for code, c := health(); code != 503 || c != "missing"; code, c = health() {
		if ctx.Err() != nil {
			t.Fatalf("healthz with the consumer missing: %d %q", code, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
	js.DeleteStream(ctx, "SQUAT")
	for code, c := health(); code != 200 || c != "ok"; code, c = health() {
		if ctx.Err() != nil {
			t.Fatalf("healthz after the squatter left: %d %q", code, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
