package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// localSidecar is an embedded server secured by local trust, with a
// receiver logged in as the sidecar that answers every job with success.
type localSidecar struct {
	url, shm string
	admin    *nats.Conn
	recv     *Receiver
	done     chan struct{}
}

func startLocalSidecar(t *testing.T) *localSidecar {
	t.Helper()
	shm := filepath.Join(t.TempDir(), "shm")
	la, err := NewLocalAuth(shm, Subjects{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Local: la})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := Connect(ctx, la.SidecarConn(ConnOptions{URL: ns.ClientURL()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	r, err := NewReceiver(ctx, admin, ReceiverConfig{ShmDir: shm, MaxInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	s := &localSidecar{url: ns.ClientURL(), shm: shm, admin: admin, recv: r, done: make(chan struct{})}
	rctx, stop := context.WithCancel(context.Background())
	jobs := make(chan *Job)
	go r.Run(rctx, jobs)
	go func() {
		defer close(s.done)
		for j := range jobs {
			j.Complete(context.Background(), Outcome{Key: j.Notice.Run + "/" + j.Notice.Var})
		}
	}()
	t.Cleanup(func() { stop(); <-s.done; r.Close() })
	return s
}

// violations collects the asynchronous permission errors of a connection.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	v.errs = append(v.errs, err.Error())
	v.mu.Unlock()
}

// saw waits until a permissions violation naming subject was reported.
func (v *violations) saw(subject string) bool {
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		v.mu.Lock()
		for _, e := range v.errs {
			if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, subject) {
				v.mu.Unlock()
				return true
			}
		}
		v.mu.Unlock()
	}
	return false
}

// producerConn logs in the way a zero-config producer does: only the shm
// dir is given; user, password and URL come from the credentials file.
func producerConn(t *testing.T, shm string) (*nats.Conn, *violations) {
	t.Helper()
	v := &violations{}
	o := ConnOptions{ShmDir: shm}
	co, err := o.withLocalCredentials()
	if err != nil || co.User != ProducerUser || co.URL == "" {
		t.Fatalf("credentials file not picked up: %+v %v", co, err)
	}
	opts, _ := co.natsOptions()
	nc, err := nats.Connect(co.URL, append(opts, nats.ErrorHandler(v.handler))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, v
}

func publishOne(t *testing.T, nc *nats.Conn, shm, id string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, nc, ProducerOptions{ID: id, ShmDir: shm, PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	snap, err := p.Begin(ctx, Spec{Run: "r", Var: "v", Step: 1, DType: fz.Float32, Dims: []uint64{16}, Mode: fz.Abs, Bound: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := snap.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pd.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// storedResult reads the last result on subj from the result stream. The
// live result can reach the producer's subscription before the stream has
// stored it (both follow the one publish), so "not found" is retried for a
// while; any other error, or a result still missing after 10 s, is returned.
func storedResult(ctx context.Context, st jetstream.Stream, subj string) (*jetstream.RawStreamMsg, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err == nil || !errors.Is(err, jetstream.ErrMsgNotFound) || time.Now().After(deadline) {
			return m, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A zero-config producer finds the credentials in its shm dir and does all
// a producer does (admission, publish, live results, the result-stream
// fallback, status); without them nobody gets in.
func TestLocalAuthProducerWorks(t *testing.T) {
	s := startLocalSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := Connect(ctx, ConnOptions{ShmDir: s.shm}) // no URL: the file's
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if res := publishOne(t, nc, s.shm, "sim1"); !res.OK || res.Key != "r/v" {
		t.Fatalf("result %+v", res)
	}
	// The fallback lookup of a missed result (docs/PROTOCOL.md §6) with the
	// producer's rights: stream info and a direct get.
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, Subjects{}.ResultStream())
	if err != nil {
		t.Fatalf("result stream info as producer: %v", err)
	}
	if _, err := storedResult(ctx, st, "fz.result.sim1.*"); err != nil {
		t.Fatalf("direct get as producer: %v", err)
	}
	p, err := NewProducer(ctx, nc, ProducerOptions{ID: "sim2", ShmDir: s.shm})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Status(ctx); err != nil {
		t.Fatalf("status as producer: %v", err)
	}

	for _, o := range []ConnOptions{{URL: s.url}, {URL: s.url, User: ProducerUser, Password: "guess"}} {
		start := time.Now()
		if _, err := Connect(ctx, o); err == nil || !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("connect with user %q and no file: %v", o.User, err)
		} else if time.Since(start) > 5*time.Second {
			t.Errorf("authorization failure retried for %v", time.Since(start))
		}
	}
}

// What the attacker did — purge the stream, delete the sidecar's
// consumer, publish a forged "ok" result, read notifications — is refused
// to a client holding the producer credentials.
func TestLocalAuthProducerCannotAdminister(t *testing.T) {
	s := startLocalSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A snapshot queued for no producer at all keeps the stream non-empty.
	ajs, _ := jetstream.New(s.admin)
	nc, v := producerConn(t, s.shm)
	js, _ := jetstream.New(nc)
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}

	if err := js.DeleteConsumer(short(), "FZ_SNAPSHOTS", "fzsidecar"); err == nil {
		t.Error("producer deleted the consumer")
	}
	if !v.saw("$JS.API.CONSUMER.DELETE.FZ_SNAPSHOTS.fzsidecar") {
		t.Errorf("no permissions violation for the consumer delete: %v", v.errs)
	}
	if _, err := ajs.Consumer(ctx, "FZ_SNAPSHOTS", "fzsidecar"); err != nil {
		t.Errorf("consumer gone after the producer's attempt: %v", err)
	}
	if err := js.DeleteStream(short(), "FZ_RESULTS"); err == nil || !v.saw("$JS.API.STREAM.DELETE.FZ_RESULTS") {
		t.Errorf("stream delete: %v, %v", err, v.errs)
	}
	if _, err := js.CreateStream(short(), jetstream.StreamConfig{Name: "STEAL", Subjects: []string{"fz.snap.>"}}); err == nil || !v.saw("$JS.API.STREAM.CREATE.STEAL") {
		t.Errorf("stream create: %v, %v", err, v.errs)
	}
	// Purge: the stream must keep the result published by a real snapshot.
	res := publishOne(t, s.admin, s.shm, "victim")
	if st, err := js.Stream(ctx, "FZ_RESULTS"); err != nil { // allowed: the whole deadline, not short()
		t.Fatal(err)
	} else if err := st.Purge(short()); err == nil || !v.saw("$JS.API.STREAM.PURGE.FZ_RESULTS") {
		t.Errorf("purge: %v, %v", err, v.errs)
	}
	rs, _ := ajs.Stream(ctx, "FZ_RESULTS")
	if _, err := storedResult(ctx, rs, "fz.result.victim."+res.MsgID); err != nil {
		t.Errorf("victim's result gone after the purge attempt: %v", err)
	}

	// A forged result: neither stored nor seen by the victim.
	sub, err := s.admin.SubscribeSync("fz.result.victim2.*")
	if err != nil {
		t.Fatal(err)
	}
	s.admin.Flush()
	forged, _ := json.Marshal(Result{Version: 1, MsgID: "m1", Producer: "victim2", OK: true, Key: "x"})
	nc.Publish("fz.result.victim2.m1", forged)
	nc.Flush()
	if !v.saw("fz.result.victim2.m1") {
		t.Errorf("no permissions violation for the forged result: %v", v.errs)
	}
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("forged result delivered: %s", m.Data)
	}
	if _, err := rs.GetLastMsgForSubject(ctx, "fz.result.victim2.m1"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("forged result stored: %v", err)
	}
	// The notifications the sidecar fetches do not reach a producer
	// subscribed to every inbox.
	snoop, err := nc.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	other, _ := producerConn(t, s.shm)
	publishOne(t, other, s.shm, "other")
	for {
		m, err := snoop.NextMsg(300 * time.Millisecond)
		if err != nil {
			break
		}
		if strings.Contains(string(m.Data), `"segment"`) {
			t.Errorf("a notification reached the producer's inbox subscription on %s: %s", m.Subject, m.Data)
		}
	}
	snoop.Unsubscribe()
	// Reading other producers' notifications (segment names) is denied too.
	if _, err := nc.SubscribeSync("fz.snap.>"); err == nil {
		nc.Flush()
		if !v.saw(`fz.snap.>`) {
			t.Errorf("subscription to notifications allowed: %v", v.errs)
		}
	}
}

// A notification's producer must be its subject's: otherwise the error goes
// to the sender, and the producer it names sees nothing.
func TestNotificationProducerMustMatchSubject(t *testing.T) {
	s := startLocalSidecar(t)
	nc, _ := producerConn(t, s.shm)
	victim, err := s.admin.SubscribeSync("fz.result.victim.*")
	if err != nil {
		t.Fatal(err)
	}
	evil, err := nc.SubscribeSync("fz.result.evil.*")
	if err != nil {
		t.Fatal(err)
	}
	s.admin.Flush()
	nc.Flush()
	seg, err := CreateSegment(s.shm, "evil", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Remove()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, body := range []string{
		`{"v":1,"msg_id":"m1","producer":"victim","run":"r","var":"v","step":1,"dtype":"f32","dims":[16],"mode":"abs","bound":0.1,"segment":"` + seg.Name() + `","offset":0,"length":64}`,
		`{"v":1,"msg_id":"m2","producer":"victim","run":"r","var":"v","step":"not a number"}`,
	} {
		if _, err := js.Publish(ctx, "fz.snap.evil", []byte(body), jetstream.WithMsgID("m"+string(rune('1'+i)))); err != nil {
			t.Fatal(err)
		}
		m, err := evil.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("notification %d: no result for the sender: %v", i, err)
		}
		var r Result
		json.Unmarshal(m.Data, &r)
		want := CodeInvalid
		if i == 1 {
			want = CodeMalformed
		}
		if r.OK || r.Error == nil || r.Error.Code != want || r.Producer != "evil" {
			t.Errorf("notification %d: result %s, want error %s for evil", i, m.Data, want)
		}
	}
	if m, err := victim.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("the named producer received %s", m.Data)
	}
}

// A consumer deleted by an administrator comes back, and snapshots flow
// again.
func TestDeletedConsumerIsRecreated(t *testing.T) {
	s := startLocalSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := jetstream.New(s.admin)
	if err := js.DeleteConsumer(ctx, "FZ_SNAPSHOTS", "fzsidecar"); err != nil {
		t.Fatal(err)
	}
	for s.recv.ConsumersRecreated() == 0 {
		if ctx.Err() != nil {
			t.Fatal("consumer not recreated")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s.recv.ConsumerMissing() {
		t.Error("still reported missing after recreation")
	}
	if _, err := js.Consumer(ctx, "FZ_SNAPSHOTS", "fzsidecar"); err != nil {
		t.Fatal(err)
	}
	nc, _ := producerConn(t, s.shm)
	if res := publishOne(t, nc, s.shm, "after"); !res.OK {
		t.Fatalf("after recreation: %+v", res)
	}
	// The whole stream deleted: both come back.
	if err := js.DeleteStream(ctx, "FZ_SNAPSHOTS"); err != nil {
		t.Fatal(err)
	}
	for s.recv.ConsumersRecreated() < 2 {
		if ctx.Err() != nil {
			t.Fatal("stream and consumer not recreated")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := publishOne(t, nc, s.shm, "after2"); !res.OK {
		t.Fatalf("after stream recreation: %+v", res)
	}
	// Recreation impossible (another stream took the subjects): reported
	// missing until it can be recreated.
	if err := js.DeleteStream(ctx, "FZ_SNAPSHOTS"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUAT", Subjects: []string{"fz.snap.>"}}); err != nil {
		t.Fatal(err)
	}
	for !s.recv.ConsumerMissing() {
		if ctx.Err() != nil {
			t.Fatal("missing consumer not reported")
		}
		time.Sleep(50 * time.Millisecond)
	}
	js.DeleteStream(ctx, "SQUAT")
	for s.recv.ConsumerMissing() {
		if ctx.Err() != nil {
			t.Fatal("consumer not recreated once possible")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The credentials file: 0600, reused by a restarted sidecar when it is
// trustworthy, replaced (never written through) when not.
func TestLocalAuthFile(t *testing.T) {
	shm := filepath.Join(t.TempDir(), "shm")
	path := LocalAuthPath(shm)
	a, err := NewLocalAuth(shm, Subjects{Prefix: "my-fz"}, nil)
	if err != nil || a.Reused {
		t.Fatal(err, a.Reused)
	}
	if err := a.WriteFile("nats://0.0.0.0:4333"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", st.Mode(), err)
	}
	if dst, _ := os.Stat(shm); dst.Mode().Perm() != 0o700 {
		t.Errorf("shm dir mode %v", dst.Mode())
	}
	c, err := ReadLocalCredentials(shm)
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://127.0.0.1:4333" || c.User != "producer" || c.Password != a.ProducerPassword() || c.Prefix != "my-fz" {
		t.Errorf("read back %+v", c)
	}
	for in, want := range map[string]string{"nats://:4222": "nats://127.0.0.1:4222", "nats://[::]:4222": "nats://[::1]:4222",
		"nats://10.1.2.3:4222": "nats://10.1.2.3:4222", "nats://localhost:1": "nats://localhost:1"} {
		if got := loopbackURL(in); got != want {
			t.Errorf("loopbackURL(%s) = %s, want %s", in, got, want)
		}
	}
	if len(c.Password) != 43 {
		t.Errorf("password %q: want 32 random bytes in base64url", c.Password)
	}
	if a2, _ := NewLocalAuth(shm, Subjects{}, nil); !a2.Reused || a2.ProducerPassword() != a.ProducerPassword() {
		t.Error("restart did not reuse the producer password")
	}
	if o := a.SidecarConn(ConnOptions{}); o.User != SidecarUser || o.Password == a.ProducerPassword() || o.InboxPrefix == "" {
		t.Errorf("sidecar login %+v", o)
	}
	if a2, _ := NewLocalAuth(shm, Subjects{}, nil); a2.sidecar == a.sidecar {
		t.Error("sidecar password reused: it must live in memory only")
	}

	// Readable by others: a producer refuses it, the sidecar replaces it.
	os.Chmod(path, 0o644)
	if _, err := ReadLocalCredentials(shm); err == nil || !strings.Contains(err.Error(), "0644") {
		t.Errorf("group/other-readable file accepted: %v", err)
	}
	a3, _ := NewLocalAuth(shm, Subjects{}, nil)
	if a3.Reused || a3.ProducerPassword() == a.ProducerPassword() {
		t.Error("a password others could read was reused")
	}
	if err := a3.WriteFile("nats://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("replaced file mode %v", st.Mode())
	}

	// A symbolic link at the name is neither followed nor written through.
	target := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(target, []byte("v=1\nuser=producer\npassword=AAAA\n"), 0o600)
	os.Remove(path)
	os.Symlink(target, path)
	if _, err := ReadLocalCredentials(shm); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink followed: %v", err)
	}
	a4, _ := NewLocalAuth(shm, Subjects{}, nil)
	if a4.Reused {
		t.Error("credentials reused through a symlink")
	}
	if err := a4.WriteFile("nats://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "v=1\nuser=producer\npassword=AAAA\n" {
		t.Errorf("symlink target written: %q", b)
	}
	if st, _ := os.Lstat(path); !st.Mode().IsRegular() {
		t.Errorf("link not replaced: %v", st.Mode())
	}

	// Owned by another user (needs root to arrange).
	if os.Getuid() == 0 {
		os.Chown(path, 65534, 65534)
		if _, err := ReadLocalCredentials(shm); err == nil || !strings.Contains(err.Error(), "uid 65534") {
			t.Errorf("someone else's file accepted: %v", err)
		}
		if a5, _ := NewLocalAuth(shm, Subjects{}, nil); a5.Reused {
			t.Error("someone else's file reused")
		}
	}

	// Something that cannot be replaced: the sidecar stops with a hint.
	os.Remove(path)
	os.MkdirAll(filepath.Join(path, "x"), 0o700)
	if err := a.WriteFile("nats://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "remove what is there") {
		t.Errorf("directory at the name: %v", err)
	}
	os.RemoveAll(path)
	if m, _ := filepath.Glob(path + ".tmp-*"); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}

	// Missing: no credentials, no error. Garbage: a clear error.
	os.Remove(path)
	if c, err := ReadLocalCredentials(shm); c != nil || err != nil {
		t.Errorf("missing file: %v %v", c, err)
	}
	for body, want := range map[string]string{
		"v=2\nuser=producer\npassword=x\n": "version",
		"v=1\nuser=producer\n":             "password missing",
		"v=1\njunk\n":                      "key=value",
	} {
		os.WriteFile(path, []byte(body), 0o600)
		if _, err := ReadLocalCredentials(shm); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
		if a, _ := NewLocalAuth(shm, Subjects{}, nil); a.Reused {
			t.Errorf("%q reused", body)
		}
	}
	// Comments, blank lines, CRLF and unknown keys are fine.
	os.WriteFile(path, []byte("# c\r\n\r\nv=1\r\nfuture=yes\r\nuser=producer\r\npassword=p=w\r\n"), 0o600)
	if c, err := ReadLocalCredentials(shm); err != nil || c.Password != "p=w" {
		t.Errorf("tolerant parse: %+v %v", c, err)
	}
}

// Explicit credentials win over the file; a file with the wrong password
// says which file was used.
func TestConnectLocalCredentialsPrecedence(t *testing.T) {
	s := startLocalSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Connect(ctx, ConnOptions{URL: s.url, ShmDir: s.shm, Token: "nope"}); err == nil {
		t.Error("explicit (wrong) token ignored in favour of the file")
	}
	other := t.TempDir()
	os.WriteFile(LocalAuthPath(other), []byte("v=1\nuser=producer\npassword=stale\n"), 0o600)
	_, err := Connect(ctx, ConnOptions{URL: s.url, ShmDir: other})
	if err == nil || !strings.Contains(err.Error(), LocalAuthPath(other)) {
		t.Errorf("stale file: %v", err)
	}
	_, err = Connect(ctx, ConnOptions{URL: s.url, ShmDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no credentials file") {
		t.Errorf("no file: %v", err)
	}
}

// The credentials file is never mapped as a segment: a notification naming
// it would otherwise put the password into the sink.
func TestCredentialsFileIsNoSegment(t *testing.T) {
	shm := t.TempDir()
	a, _ := NewLocalAuth(shm, Subjects{}, nil)
	if err := a.WriteFile("nats://127.0.0.1:4222"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(shm, LocalAuthFile+".tmp-1"), make([]byte, 64), 0o600)
	d, err := OpenShmDir(shm)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range []string{LocalAuthFile, LocalAuthPath(shm), "./" + LocalAuthFile, LocalAuthFile + ".tmp-1"} {
		m, err := d.Map(name, 0, 16)
		if err == nil {
			m.Close()
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeBadSegment {
			t.Errorf("Map(%q): %v, want bad_segment", name, err)
		}
	}
}

// An embedded server reachable from other hosts without any authentication
// says so; under local trust, or on loopback, it does not.
func TestNonLoopbackWithoutAuthWarns(t *testing.T) {
	for _, c := range []struct {
		listen string
		local  bool
		warn   bool
	}{{"0.0.0.0:0", false, true}, {"0.0.0.0:0", true, false}, {"127.0.0.1:0", false, false}, {"localhost:0", false, false}} {
		var buf strings.Builder
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cfg := ServerConfig{Listen: c.listen, StoreDir: t.TempDir(), Log: log}
		if c.local {
			cfg.Local, _ = NewLocalAuth(t.TempDir(), Subjects{}, nil)
		}
		ns, err := StartServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ns.Shutdown()
		mu.Lock()
		got := strings.Contains(buf.String(), "without authentication")
		mu.Unlock()
		if got != c.warn {
			t.Errorf("listen %s local %v: warning %v, want %v; log:\n%s", c.listen, c.local, got, c.warn, buf.String())
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A connected producer follows a sidecar restarted with a new password
// (its credentials file was replaced): reconnects read the file again.
func TestLocalAuthReconnectsWithNewPassword(t *testing.T) {
	shm, store := t.TempDir(), t.TempDir()
	la, _ := NewLocalAuth(shm, Subjects{}, nil)
	ns, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: store, Local: la})
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(ns.ClientURL(), "nats://")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := Connect(ctx, ConnOptions{ShmDir: shm})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ns.Shutdown()
	ns.WaitForShutdown()
	os.Remove(LocalAuthPath(shm)) // e.g. /dev/shm cleaned: the next sidecar writes a new password
	la2, _ := NewLocalAuth(shm, Subjects{}, nil)
	if la2.Reused || la2.ProducerPassword() == la.ProducerPassword() {
		t.Fatal("expected a new password")
	}
	ns, err = StartServer(ServerConfig{Listen: addr, StoreDir: store, Local: la2})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	for !nc.IsConnected() {
		if ctx.Err() != nil {
			t.Fatalf("producer did not reconnect with the new password: %v", nc.LastError())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := nc.Request("fz.status", nil, 200*time.Millisecond); errors.Is(err, nats.ErrAuthorization) {
		t.Fatal(err)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}
