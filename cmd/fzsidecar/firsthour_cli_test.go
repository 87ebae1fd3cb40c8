package main

// A new user's first hour (issue #27, points 10-12): the sink commands find
// serve's sink without flags, a missing sidecar is reported within seconds
// with progress, and the small things (version, help CMD, typos, a
// directory given to publish, help texts) behave.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runEnv runs the built binary in dir with the FZ_* and AWS_* variables of
// the test's environment removed and env added, as a user's shell would.
func runEnv(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FZ_") && !strings.HasPrefix(kv, "AWS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// ls, get, restore and put default to serve's sink (./fzdata), honour
// FZ_SINK and --config as serve does, and ls of a sink that does not exist
// says so and fails instead of listing nothing.
func TestSinkCommandsUseServesSink(t *testing.T) {
	work := t.TempDir()
	fzf := writeContainer(t, t.TempDir(), "a.fz", fieldF32(0))
	must := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, code := runEnv(t, work, env, args...)
		if code != 0 {
			t.Fatalf("%v (env %v): exit %d\n%s%s", args, env, code, out, errOut)
		}
		return out + errOut
	}
	// No sink given anywhere: ./fzdata, where a zero-config serve writes.
	if out, errOut, code := runEnv(t, work, nil, "ls"); code != 1 || !strings.Contains(errOut, "does not exist") ||
		!strings.Contains(errOut, filepath.Join(work, "fzdata")) {
		t.Fatalf("ls before anything was stored: exit %d, %q %q; want a clear 'does not exist' naming ./fzdata", code, out, errOut)
	}
	must(nil, "put", "--run", "r1", "--var", "temp", "--step", "3", fzf)
	if _, err := os.Stat(filepath.Join(work, "fzdata", "r1", "temp")); err != nil {
		t.Fatalf("put without --sink did not write into ./fzdata: %v", err)
	}
	if out := must(nil, "ls"); !strings.Contains(out, "r1") {
		t.Errorf("ls without --sink:\n%s", out)
	}
	must(nil, "get", "--run", "r1", "--var", "temp", "--step", "latest", "-o", filepath.Join(work, "t.raw"))
	must(nil, "restore", "--run", "r1", "--step", "3", "--to", filepath.Join(work, "restored"))

	// FZ_SINK, as for serve; a wrong one names the variable.
	other := filepath.Join(work, "other")
	must([]string{"FZ_SINK=" + other}, "put", "--run", "r2", "--var", "v", "--step", "1", fzf)
	if out := must([]string{"FZ_SINK=" + other}, "ls"); !strings.Contains(out, "r2") || strings.Contains(out, "r1") {
		t.Errorf("ls with FZ_SINK=%s:\n%s", other, out)
	}
	_, errOut, code := runEnv(t, work, []string{"FZ_SINK=" + filepath.Join(work, "typo")}, "ls")
	if code != 1 || !strings.Contains(errOut, "does not exist") || !strings.Contains(errOut, "FZ_SINK") {
		t.Errorf("ls with a missing FZ_SINK: exit %d, %q", code, errOut)
	}
	// --config (and FZ_CONFIG): the file serve reads.
	cfg := filepath.Join(work, "sidecar.yaml")
	os.WriteFile(cfg, []byte("sink: "+other+"\n"), 0o644)
	if out := must(nil, "ls", "--config", cfg); !strings.Contains(out, "r2") {
		t.Errorf("ls --config:\n%s", out)
	}
	if out := must([]string{"FZ_CONFIG=" + cfg}, "ls", "--run", "r2"); !strings.Contains(out, "v") {
		t.Errorf("ls with FZ_CONFIG:\n%s", out)
	}
	// --sink beats the environment, which beats the file.
	if out := must([]string{"FZ_CONFIG=" + cfg}, "ls", "--sink", filepath.Join(work, "fzdata")); !strings.Contains(out, "r1") {
		t.Errorf("--sink over FZ_CONFIG:\n%s", out)
	}
	// A bad config is a usage error naming file, line and key.
	os.WriteFile(cfg, []byte("sinc: x\n"), 0o644)
	if _, errOut, code := runEnv(t, work, nil, "ls", "--config", cfg); code != 2 || !strings.Contains(errOut, "sidecar.yaml:1") {
		t.Errorf("ls with a bad config: exit %d, %q", code, errOut)
	}
	// An explicit path that does not exist.
	if _, errOut, code := runEnv(t, work, nil, "ls", "--sink", "/nonexistent/fzdata"); code != 1 ||
		!strings.Contains(errOut, "/nonexistent/fzdata does not exist") || !strings.Contains(errOut, "flag --sink") {
		t.Errorf("ls of a missing path: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runEnv(t, work, nil, "get", "--sink", "/nonexistent/fzdata", "--run", "r", "--var", "v", "--step", "1", "-o", "x"); code != 1 ||
		!strings.Contains(errOut, "does not exist") {
		t.Errorf("get from a missing path: exit %d, %q", code, errOut)
	}
}

// The S3 endpoint comes from the same settings as serve's: s3.endpoint in
// the config file or FZ_S3_ENDPOINT, with only the credentials in AWS_*.
func TestSinkCommandsS3EndpointFromConfig(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.Bucket(t)
	work := t.TempDir()
	fzf := writeContainer(t, t.TempDir(), "a.fz", fieldF32(1))
	creds := []string{"AWS_ACCESS_KEY_ID=" + miniotest.AccessKey, "AWS_SECRET_ACCESS_KEY=" + miniotest.SecretKey}
	cfg := filepath.Join(work, "s3.yaml")
	os.WriteFile(cfg, []byte("sink: s3://"+bucket+"/runs\ns3:\n  endpoint: "+srv.Endpoint+"\n  region: us-east-1\n"), 0o644)
	if out, errOut, code := runEnv(t, work, creds, "put", "--config", cfg, "--run", "s", "--var", "v", "--step", "7", fzf); code != 0 {
		t.Fatalf("put --config with s3.endpoint: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := runEnv(t, work, creds, "ls", "--config", cfg, "--run", "s", "--var", "v", "--json")
	var rows []lsRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Step != 7 {
		t.Fatalf("ls --config with s3.endpoint: exit %d\n%s%s", code, out, errOut)
	}
	env := append([]string{"FZ_SINK=s3://" + bucket + "/runs", "FZ_S3_ENDPOINT=" + srv.Endpoint}, creds...)
	if out, errOut, code := runEnv(t, work, env, "get", "--run", "s", "--var", "v", "--step", "latest", "-o", filepath.Join(work, "v.raw")); code != 0 {
		t.Fatalf("get with FZ_S3_ENDPOINT: exit %d\n%s%s", code, out, errOut)
	}
	got, _ := os.ReadFile(filepath.Join(work, "v.raw"))
	checkClose(t, "get via FZ_S3_ENDPOINT", fieldF32(1), got, 0.05)

	// The shipped configs/s3.yaml (bucket fzsidecar), its endpoint
	// overridden by --s3-endpoint as serve's would be.
	shipped, err := filepath.Abs("../../configs/s3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ok, _ := srv.Client(t).BucketExists(ctx, "fzsidecar"); !ok {
		if err := srv.Client(t).MakeBucket(ctx, "fzsidecar", minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--config", shipped, "--s3-endpoint", srv.Endpoint}
	if out, errOut, code := runEnv(t, work, creds, append([]string{"put", "--run", "shipped", "--var", "v", "--step", "1", fzf}, args...)...); code != 0 {
		t.Fatalf("put with configs/s3.yaml: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runEnv(t, work, creds, append([]string{"ls"}, args...)...); code != 0 || !strings.Contains(out, "shipped") {
		t.Fatalf("ls with configs/s3.yaml: exit %d\n%s%s", code, out, errOut)
	}
}

func TestVersionHelpAndTypos(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errOut, code := run(t, args...)
		if code != 0 || !strings.HasPrefix(out, "fzsidecar ") || !strings.Contains(out, "container format v1") {
			t.Errorf("%v: exit %d, %q %q", args, code, out, errOut)
		}
	}
	out, _, code := run(t, "help", "ls")
	if code != 0 || !strings.Contains(out, "Usage: fzsidecar ls") || !strings.Contains(out, "--config") {
		t.Errorf("help ls: exit %d, stdout %q", code, out)
	}
	if out, _, code := run(t, "help", "bench", "e2e"); code != 0 || !strings.Contains(out, "Usage: fzsidecar bench e2e") {
		t.Errorf("help bench e2e: exit %d, stdout %q", code, out)
	}
	if out, _, code := run(t, "help"); code != 0 || !strings.Contains(out, "Commands:") {
		t.Errorf("help: exit %d, %q", code, out)
	}
	for typo, want := range map[string]string{"lss": "'ls'", "pubilsh": "'publish'", "serv": "'serve'", "verison": "'version'", "restor": "'restore'"} {
		_, errOut, code := run(t, typo)
		if code != 2 || !strings.Contains(errOut, "Did you mean "+want) {
			t.Errorf("%s: exit %d, %q; want a suggestion of %s", typo, code, errOut, want)
		}
	}
	if _, errOut, code := run(t, "help", "nope"); code != 2 || !strings.Contains(errOut, `unknown command "nope"`) {
		t.Errorf("help nope: exit %d, %q", code, errOut)
	}
	// Mistyped flags too: the hint comes last, after the flag list.
	for flagTypo, want := range map[string]string{"--sinc": "--sink", "--dim": "--dims", "--stpe": "--step"} {
		_, errOut, code := run(t, "ls", flagTypo, "x")
		if flagTypo != "--sinc" {
			_, errOut, code = run(t, "publish", flagTypo, "x")
		}
		if code != 2 || !strings.Contains(errOut, "Did you mean "+want) {
			t.Errorf("%s: exit %d, %q; want a suggestion of %s", flagTypo, code, errOut, want)
		}
	}
}

// Every command's help is free of the contradictions a user found: no
// flag with two different defaults, no "ignored" for a combination that
// is an error.
func TestHelpTexts(t *testing.T) {
	names := []string{}
	for n := range commands {
		names = append(names, n)
	}
	names = append(names, "bench e2e")
	for _, n := range names {
		out, _, code := run(t, "help", n)
		if code != 0 || !strings.Contains(out, "Usage: fzsidecar") {
			t.Errorf("help %s: exit %d, %q", n, code, out)
			continue
		}
		// PrintDefaults puts each flag's help on its own line.
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "(default ") > 1 {
				t.Errorf("help %s: two defaults in %q", n, strings.TrimSpace(line))
			}
			if strings.Contains(line, "ignored with") {
				t.Errorf("help %s: %q (the combination is an error, not ignored)", n, strings.TrimSpace(line))
			}
		}
		// eval --synthetic needs neither --dtype nor --dims.
		if n == "eval" && strings.Contains(out, "100x500x500 (required)\n") {
			t.Errorf("help eval calls --dims required, but --synthetic needs none:\n%s", out)
		}
	}
}

// --help must not print secrets taken from the environment (they were the
// flags' defaults, so PrintDefaults showed them).
func TestHelpHidesSecrets(t *testing.T) {
	env := []string{"FZ_NATS_PASSWORD=hunter2-secret", "FZ_NATS_TOKEN=tok-secret"}
	for _, c := range []string{"publish", "simulate", "serve"} {
		out, errOut, _ := runEnv(t, t.TempDir(), env, c, "--help")
		if strings.Contains(out+errOut, "secret") {
			t.Errorf("%s --help prints a secret from the environment:\n%s", c, out+errOut)
		}
	}
}

// publish with a directory says so at once, before looking for a sidecar.
func TestPublishDirectory(t *testing.T) {
	start := time.Now()
	_, errOut, code := run(t, "publish", "--nats-url", "nats://127.0.0.1:1", "--run", "r", "--var", "v", "--step", "1",
		"--dtype", "f32", "--dims", "4", "--eb", "1e-3", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "is a directory") || time.Since(start) > 5*time.Second {
		t.Errorf("publish DIR: exit %d after %v, %q", code, time.Since(start), errOut)
	}
	// The message says it all: no flag list burying it (QA).
	if strings.Contains(errOut, "Usage:") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("publish DIR: %q: expected the one-line message only", errOut)
	}
}

// Usage mistakes QA met: `ls r1` (the run is a flag) gets a hint with the
// command to type; an unknown flag is named as typed (-o, not --o).
func TestUsageHints(t *testing.T) {
	for args, want := range map[string]string{
		"ls r1":   "fzsidecar ls --run r1",
		"ls r1 T": "fzsidecar ls --run r1 --var T",
	} {
		_, errOut, code := run(t, strings.Fields(args)...)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, %q; want a hint %q", args, code, errOut, want)
		}
	}
	for _, typed := range []string{"-o", "--o", "-o=x"} {
		_, errOut, code := run(t, "restore", typed, "x")
		name, _, _ := strings.Cut(typed, "=")
		if code != 2 || !strings.Contains(errOut, "unknown flag "+name+". Did you mean --to?") {
			t.Errorf("restore %s: exit %d, %q; want it named %s with a hint of --to", typed, code, errOut, name)
		}
	}
}

// With no sidecar running, publish and simulate say what they wait for
// within about a second, keep saying it, and give up after
// --connect-timeout with an error that says what to do.
func TestProducersWithoutSidecar(t *testing.T) {
	e := newServeEnv(t) // a free port nobody listens on
	file := filepath.Join(t.TempDir(), "f.raw")
	os.WriteFile(file, make([]byte, 4*64), 0o644)
	for _, args := range [][]string{
		{"publish", "--run", "r", "--var", "v", "--step", "1", "--dtype", "f32", "--dims", "8x8", "--eb", "1e-3", file},
		{"simulate", "--run", "r", "--steps", "1", "--dims", "8x8"},
	} {
		args = append(args, "--nats-url", e.url(), "--shm-dir", e.shm, "--connect-timeout", "5s")
		t0 := time.Now()
		_, errOut, code := run(t, args...)
		el := time.Since(t0)
		if code != 1 || el > 15*time.Second {
			t.Errorf("%s without a sidecar: exit %d after %v: %s", args[0], code, el, errOut)
		}
		// The first line comes one second after the command starts waiting;
		// it prints the time since the command started, rounded, which a
		// loaded machine's slow start-up can make 2s. Later than that is
		// not "within about a second" (the --connect-timeout is 5s).
		first := regexp.MustCompile(`waiting for the sidecar's NATS server at ` + regexp.QuoteMeta(e.url()) + ` \([12]s; giving up after 5s`)
		if !first.MatchString(errOut) {
			t.Errorf("%s without a sidecar: stderr lacks a first progress line at 1-2s matching %q:\n%s", args[0], first, errOut)
		}
		for _, want := range []string{"still waiting", "no sidecar reachable at " + e.url(), "fzsidecar serve"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s without a sidecar: stderr lacks %q:\n%s", args[0], want, errOut)
			}
		}
	}
}

// A NATS server without a sidecar on it (an external server; or a sidecar
// with another --subject-prefix): publish says so within --connect-timeout
// instead of waiting out the admission's block timeout in silence.
func TestPublishNATSWithoutSidecar(t *testing.T) {
	ns, err := ingest.StartServer(ingest.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	file := filepath.Join(t.TempDir(), "f.raw")
	os.WriteFile(file, make([]byte, 4*64), 0o644)
	t0 := time.Now()
	_, errOut, code := run(t, "publish", "--nats-url", ns.ClientURL(), "--shm-dir", t.TempDir(), "--connect-timeout", "4s",
		"--run", "r", "--var", "v", "--step", "1", "--dtype", "f32", "--dims", "8x8", "--eb", "1e-3", file)
	el := time.Since(t0)
	if code != 1 || el > 12*time.Second || !strings.Contains(errOut, "no sidecar answered on fz.status") ||
		!strings.Contains(errOut, "waiting for a sidecar to answer on fz.status") {
		t.Errorf("publish to a NATS server without a sidecar: exit %d after %v:\n%s", code, el, errOut)
	}
}

// status' in_flight counts snapshots being worked on: 0 when idle (it
// counted the receiver's fetch slot, so an idle sidecar said 1).
func TestStatusInFlightIdle(t *testing.T) {
	e := newServeEnv(t)
	e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: e.url(), ShmDir: e.shm})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	prod, err := ingest.NewProducer(ctx, nc, ingest.ProducerOptions{ShmDir: e.shm})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	file := filepath.Join(t.TempDir(), "f.raw")
	os.WriteFile(file, make([]byte, 4*64), 0o644)
	pd, err := prod.PublishFile(ctx, file, ingest.Spec{Run: "r", Var: "v", Step: 1, DType: fz.Float32, Dims: []uint64{64}, Mode: fz.Abs, Bound: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The job ends just after its result is published: allow a moment.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := prod.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.InFlight == 0 && st.UsedBytes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle sidecar reports in_flight %d, used_bytes %d; want 0", st.InFlight, st.UsedBytes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A notification whose Nats-Msg-Id header differs from (or lacks) the
// body's msg_id is answered with an invalid result: JetStream deduplicates
// on the header, producers match results on msg_id.
func TestNatsMsgIDMustMatch(t *testing.T) {
	e := newServeEnv(t)
	e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: e.url(), ShmDir: e.shm})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	results := make(chan ingest.Result, 8)
	sub, err := nc.Subscribe("fz.result.p1.>", func(m *nats.Msg) {
		var r ingest.Result
		if json.Unmarshal(m.Data, &r) == nil {
			results <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	nc.Flush()
	js, _ := jetstream.New(nc)
	body := func(id string) []byte {
		return []byte(`{"v":1,"msg_id":"` + id + `","producer":"p1","run":"r","var":"v","step":1,"dtype":"f32","dims":[4],"mode":"abs","bound":0.1,"segment":"nope.seg","offset":0,"length":16}`)
	}
	if _, err := js.Publish(ctx, "fz.snap.p1", body("m1"), jetstream.WithMsgID("other")); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "fz.snap.p1", body("m2")); err != nil {
		t.Fatal(err)
	}
	// The control: a matching header reaches the segment check.
	if _, err := js.Publish(ctx, "fz.snap.p1", body("m3"), jetstream.WithMsgID("m3")); err != nil {
		t.Fatal(err)
	}
	got := map[string]ingest.Result{}
	for len(got) < 3 {
		select {
		case r := <-results:
			got[r.MsgID] = r
		case <-ctx.Done():
			t.Fatalf("results: %v", got)
		}
	}
	for _, id := range []string{"m1", "m2"} {
		if r := got[id]; r.OK || r.Error == nil || r.Error.Code != ingest.CodeInvalid || !strings.Contains(r.Error.Message, "Nats-Msg-Id") {
			t.Errorf("%s: %+v (error %v), want code invalid naming Nats-Msg-Id", id, r, r.Error)
		}
	}
	if r := got["m3"]; r.Error == nil || r.Error.Code != ingest.CodeNoSegment {
		t.Errorf("m3: %+v (error %v), want missing_segment", r, r.Error)
	}
}

// While results take long, publish and simulate say so every few seconds
// with what the sidecar reports, or that it does not answer; the snapshot
// is stored once the sidecar carries on. The sidecar is frozen (SIGSTOP)
// after the notification is published; a snapshot it finished before the
// signal landed is retried with the next step.
func TestProducersReportWaitForResults(t *testing.T) {
	ns, err := ingest.StartServer(ingest.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	e := newServeEnv(t)
	srv := start(t, "serve", "--nats-url", ns.ClientURL(), "--shm-dir", e.shm, "--sink", e.sink, "--data-dir", e.data,
		"--backend", "cpu", "--metrics-listen", "off", "--codec-threads", "1")
	srv.waitFor(t, "fzsidecar ready", 60*time.Second)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	notes, err := nc.SubscribeSync("fz.snap.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	// 32 MiB of noise: compressing it takes long enough for the signal.
	const n = 8 << 20
	raw := make([]byte, 4*n)
	x := uint32(1)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(x%100000)/7))
	}
	file := filepath.Join(t.TempDir(), "noise.f32")
	os.WriteFile(file, raw, 0o644)
	common := []string{"--nats-url", ns.ClientURL(), "--shm-dir", e.shm}
	t.Run("publish", func(t *testing.T) {
		waitWhileFrozen(t, srv, notes, func(step int) *proc {
			return start(t, append([]string{"publish", "--run", "slow", "--var", "v", "--step", strconv.Itoa(step), "--dtype", "f32",
				"--dims", strconv.Itoa(n), "--mode", "abs", "--eb", "1e-3", file}, common...)...)
		}, "stored slow/v/", "waiting for the result of slow/v step ")
	})
	t.Run("simulate", func(t *testing.T) {
		waitWhileFrozen(t, srv, notes, func(step int) *proc {
			return start(t, append([]string{"simulate", "--run", "slowsim", "--vars", "v", "--steps", "1", "--start-step", strconv.Itoa(step),
				"--dims", "32x512x512", "--mode", "abs", "--eb", "1e-6"}, common...)...)
		}, "1 stored, 0 failed", "waiting for 1 results (none for ")
	})
}

// waitWhileFrozen starts a producer (launch), freezes the sidecar once its
// notification is out, checks the producer's progress lines and that it
// finishes after the sidecar is thawed.
func waitWhileFrozen(t *testing.T, srv *proc, notes *nats.Subscription, launch func(step int) *proc, stored, progress string) {
	for step := 1; step <= 5; step++ {
		p := launch(step)
		if _, err := notes.NextMsg(60 * time.Second); err != nil {
			t.Fatalf("no notification: %v\n%s", err, p.stderr())
		}
		srv.cmd.Process.Signal(syscall.SIGSTOP)
		deadline := time.Now().Add(20 * time.Second)
		exited := false
		for !strings.Contains(p.stderr(), "does not answer") && time.Now().Before(deadline) && !exited {
			select {
			case <-p.done: // its result was on the way after all
				exited = true
			case <-time.After(100 * time.Millisecond):
			}
		}
		srv.cmd.Process.Signal(syscall.SIGCONT)
		if exited && strings.Contains(p.stdout(), stored) {
			continue
		}
		if !strings.Contains(p.stderr(), progress) || !strings.Contains(p.stderr(), "does not answer") {
			t.Fatalf("no progress while the sidecar was frozen:\n%s", p.stderr())
		}
		if code := p.wait(t, 120*time.Second); code != 0 || !strings.Contains(p.stdout(), stored) {
			t.Fatalf("after the sidecar carried on: exit %d\n%s%s", code, p.stdout(), p.stderr())
		}
		return
	}
	t.Fatal("the sidecar finished every snapshot before SIGSTOP landed (5 tries): the test could not check the progress")
}
