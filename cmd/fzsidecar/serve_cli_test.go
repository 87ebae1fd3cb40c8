package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/nats-io/nats.go/jetstream"
)

var metricsURL = regexp.MustCompile(`metrics (http://\S+/metrics)`)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	r, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// metricValue finds `name{labels} value` in a Prometheus text page.
func metricValue(page, series string) (float64, bool) {
	for _, l := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// /metrics counts what happened (stored, rejected, bytes, stages, queues)
// and /healthz says ok while serving; SIGTERM then exits 0.
func TestServeMetricsAndHealth(t *testing.T) {
	e := newServeEnv(t)
	srv := e.serve(t)
	m := metricsURL.FindStringSubmatch(srv.stdout())
	if m == nil {
		t.Fatalf("ready line without metrics URL: %s", srv.stdout())
	}
	code, body := httpGet(t, strings.TrimSuffix(m[1], "/metrics")+"/healthz")
	var h struct {
		Status, NATS string
	}
	if json.Unmarshal([]byte(body), &h); code != 200 || h.Status != "ok" || h.NATS != "CONNECTED" {
		t.Fatalf("healthz: %d %s", code, body)
	}
	sim := start(t, "simulate", "--nats-url", e.url(), "--shm-dir", e.shm, "--run", "met", "--vars", "a,b",
		"--steps", "3", "--dims", "8x64x64", "--interval", "0")
	if code := sim.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("simulate exit %d: %s", code, sim.stderr())
	}
	// The producer sees its result a moment before the sidecar acks and
	// counts it: poll until the counters settle.
	want := map[string]float64{
		`fzsidecar_snapshots_total{outcome="stored"}`:     6,
		`fzsidecar_bytes_in_total`:                        6 * 8 * 64 * 64 * 4,
		`fzsidecar_stage_seconds_count{stage="compress"}`: 6,
		`fzsidecar_stage_seconds_count{stage="store"}`:    6,
		`fzsidecar_queue_depth{stage="store"}`:            0,
		`fzsidecar_in_flight`:                             0,
		`fzsidecar_budget_used_bytes`:                     0,
	}
	var page string
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, page = httpGet(t, m[1])
		var bad []string
		for series, w := range want {
			if got, ok := metricValue(page, series); !ok || got != w {
				bad = append(bad, fmt.Sprintf("%s = %v (present %v), want %v", series, got, ok, w))
			}
		}
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics did not settle:\n%s", strings.Join(bad, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, ok := metricValue(page, "fzsidecar_bytes_out_total"); !ok || out <= 0 || out >= 6*8*64*64*4 {
		t.Errorf("bytes out %v", out)
	}
	if r, ok := metricValue(page, "fzsidecar_ratio"); !ok || r <= 1 {
		t.Errorf("ratio %v", r)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Errorf("serve exit %d after SIGTERM", code)
	}
	if !strings.Contains(srv.stderr(), "shutting down") || !strings.Contains(srv.stderr(), "sidecar stopped") {
		t.Errorf("no orderly shutdown in the log:\n%s", lastN(srv.stderr(), 1500))
	}
}

// Notifications the receiver rejects are counted by kind, and a full
// budget shows in the budget gauges.
func TestServeMetricsCountRejections(t *testing.T) {
	e := newServeEnv(t)
	srv := e.serve(t)
	m := metricsURL.FindStringSubmatch(srv.stdout())
	if m == nil {
		t.Fatalf("no metrics URL: %s", srv.stdout())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(ctx, ingest.ConnOptions{URL: e.url(), ShmDir: e.shm})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for i, body := range []string{`{not json`, `{"v":1,"msg_id":"m2","producer":"evil","run":"r","var":"v","step":1,"dtype":"f32","dims":[4],"mode":"abs","bound":0.1,"segment":"../etc/passwd","offset":0,"length":16}`} {
		if _, err := js.Publish(ctx, "fz.snap.evil", []byte(body), jetstream.WithMsgID([]string{"bad0", "m2"}[i])); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, page := httpGet(t, m[1])
		rej, _ := metricValue(page, `fzsidecar_snapshots_total{outcome="rejected"}`)
		failed, _ := metricValue(page, `fzsidecar_snapshots_total{outcome="failed"}`)
		mal, _ := metricValue(page, `fzsidecar_errors_total{kind="malformed"}`)
		seg, _ := metricValue(page, `fzsidecar_errors_total{kind="bad_segment"}`)
		// The unreadable one never becomes a job (rejected); the escaping
		// segment is refused when mapped (failed).
		if rej == 1 && failed == 1 && mal == 1 && seg == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rejected %v, failed %v, malformed %v, bad_segment %v; want 1 each", rej, failed, mal, seg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serve --config FILE: the shipped example works as is (with addresses
// moved out of the way), the environment overrides the file, flags
// override the environment, and bad values name key and expectation.
func TestServeConfig(t *testing.T) {
	e := newServeEnv(t)
	dir := t.TempDir()
	shipped, err := os.ReadFile("../../configs/sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("127.0.0.1:4222", e.listen, "/dev/shm/fzsidecar", e.shm, ".fzsidecar", e.data,
		"./fzdata", filepath.Join(dir, "from-file"), "127.0.0.1:9464", "127.0.0.1:0").Replace(string(shipped))
	file := filepath.Join(dir, "sidecar.yaml")
	os.WriteFile(file, []byte(cfg), 0o644)
	t.Setenv("FZ_SINK", filepath.Join(dir, "from-env"))
	t.Setenv("FZ_PIPELINE_WRITERS", "2")
	srv := start(t, "serve", "--config", file, "--writers", "3", "--backend", "cpu")
	srv.waitFor(t, "fzsidecar ready", 60*time.Second)
	if !strings.Contains(srv.stdout(), "from-env") {
		t.Errorf("FZ_SINK did not override the file: %s", srv.stdout())
	}
	srv.stderrHas("sidecar ready", 30*time.Second) // logged before the ready line, read separately
	if !strings.Contains(srv.stderr(), "in_flight=10") {
		// 2 compressors + 4 queue + 3 writers (flag beats env) + 1
		t.Errorf("in-flight jobs not from compressors+queue+writers(flag)+1=10:\n%s", lastN(srv.stderr(), 1500))
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	t.Setenv("FZ_SINK", "")
	t.Setenv("FZ_PIPELINE_WRITERS", "")

	bad := []struct {
		yaml, env string
		want      []string
	}{
		{"pipeline:\n  writers: lots\n", "", []string{"sidecar.yaml:2", "pipeline.writers", `"lots"`, "whole number"}},
		{"pipline:\n  writers: 2\n", "", []string{"sidecar.yaml:1", "pipline", "unknown key", "pipeline"}},
		{"budget: 4GB\njetstream:\n  ack_wait: soon\n", "", []string{"sidecar.yaml:3", "jetstream.ack_wait", "positive duration"}},
		{"", "FZ_BACKEND=tpu", []string{"environment FZ_BACKEND", "backend", "auto, cpu or gpu"}},
	}
	for _, c := range bad {
		os.WriteFile(file, []byte(c.yaml), 0o644)
		p := start(t, "serve", "--config", file)
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			p.kill()
			t.Setenv(k, v)
			p = start(t, "serve", "--config", file)
		}
		code := p.wait(t, 30*time.Second)
		if code != 2 {
			t.Errorf("%q %s: exit %d, want 2", c.yaml, c.env, code)
		}
		for _, w := range c.want {
			if !strings.Contains(p.stderr(), w) {
				t.Errorf("%q %s: error lacks %q: %s", c.yaml, c.env, w, p.stderr())
			}
		}
	}
	if code, _, errOut := cli(t, "serve", "--config", filepath.Join(dir, "nope.yaml")); code != 1 || !strings.Contains(errOut, "nope.yaml") {
		t.Errorf("missing config file: exit %d: %s", code, errOut)
	}
}

func TestBenchE2ESmoke(t *testing.T) {
	j := filepath.Join(t.TempDir(), "r.json")
	p := start(t, "bench", "e2e", "--producers", "2", "--snapshots", "2", "--size", "1MiB", "--json", j)
	if code := p.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("bench e2e exit %d:\n%s\n%s", code, p.stdout(), p.stderr())
	}
	t.Log(p.stdout())
	var r struct {
		Raw    uint64  `json:"raw_bytes"`
		Bps    float64 `json:"ingest_bytes_per_second"`
		Failed int     `json:"failed"`
	}
	b, _ := os.ReadFile(j)
	if err := json.Unmarshal(b, &r); err != nil || r.Raw != 4<<20 || r.Bps <= 0 || r.Failed != 0 {
		t.Fatalf("report %s (%v)", b, err)
	}
	if code, _, errOut := cli(t, "bench", "e2e", "--size", "3"); code != 2 || !strings.Contains(errOut, "--size") {
		t.Errorf("bad size: exit %d %s", code, errOut)
	}
}
