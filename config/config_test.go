package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The shipped example must load and say exactly what the defaults are, so
// the file is honest documentation.
func TestShippedConfigsLoad(t *testing.T) {
	s, err := Load("../configs/sidecar.yaml", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.set = nil
	if d := Defaults(); !reflect.DeepEqual(s, d) {
		t.Errorf("configs/sidecar.yaml differs from the defaults:\n file %+v\n defs %+v", s, d)
	}
	// Every key of the table appears in it, so nothing is undocumented.
	b, _ := os.ReadFile("../configs/sidecar.yaml")
	for _, e := range table {
		leaf := e.key[strings.LastIndex(e.key, ".")+1:]
		if e.secret || strings.HasPrefix(e.key, "s3.") {
			continue
		}
		if !strings.Contains(string(b), leaf+":") {
			t.Errorf("configs/sidecar.yaml does not mention %s", e.key)
		}
	}
	s3, err := Load("../configs/s3.yaml", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s3.Sink, "s3://") || s3.S3.Endpoint == "" || s3.Pipeline.Writers != 8 {
		t.Errorf("configs/s3.yaml: %+v", s3)
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "c.yaml")
	os.WriteFile(f, []byte("sink: /from/file\nbackend: gpu\npipeline:\n  writers: 3\n  queue: 9\n"), 0o644)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	_, apply := Flags(fs)
	if err := fs.Parse([]string{"--writers", "7"}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(f, env(map[string]string{"FZ_SINK": "/from/env", "FZ_PIPELINE_WRITERS": "5", "FZ_NATS_TOKEN": "tok"}), apply)
	if err != nil {
		t.Fatal(err)
	}
	if s.Sink != "/from/env" || s.Backend != "gpu" || s.Pipeline.Writers != 7 || s.Pipeline.Queue != 9 || s.NATS.Token != "tok" {
		t.Errorf("precedence wrong: sink %q backend %q writers %d queue %d", s.Sink, s.Backend, s.Pipeline.Writers, s.Pipeline.Queue)
	}
	if src := s.Source("pipeline.writers"); src != "flag --writers" {
		t.Errorf("source of pipeline.writers: %q", src)
	}
	if src := s.Source("pipeline.queue"); src != f+":5" {
		t.Errorf("source of pipeline.queue: %q", src)
	}
	if s.Source("metrics.listen") != "default" {
		t.Errorf("metrics.listen source %q", s.Source("metrics.listen"))
	}
}

// Errors name where the value came from, the key, the value and what was
// expected.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		file  string
		env   map[string]string
		flags []string
		want  []string
	}{
		{file: "pipeline:\n  writers: many\n", want: []string{"c.yaml:2", "pipeline.writers", `"many"`, "whole number from 1 to 256"}},
		{file: "pipeline:\n  writer: 3\n", want: []string{"c.yaml:2", "pipeline.writer", "unknown key", "writers"}},
		{file: "sinc: /x\n", want: []string{"c.yaml:1", "sinc", "unknown key", "sink"}},
		{file: "budget: lots\n", want: []string{"budget", `"lots"`, "4GiB"}},
		{file: "jetstream:\n  ack_wait: 30\n", want: []string{"jetstream.ack_wait", "30s"}},
		{file: "backend: tpu\n", want: []string{"backend", `"tpu"`, "auto, cpu or gpu"}},
		{file: "nats: 5\n", want: []string{"c.yaml:1", "nats", "mapping"}},
		{file: "sink: [a, b]\n", want: []string{"sink", "single value"}},
		{file: "pipeline:\n\twriters: 3\n", want: []string{"c.yaml"}},
		{file: "nats:\n  url: nats://x:4222\n  listen: 127.0.0.1:1\n", want: []string{"nats.listen", "cannot be combined with nats.url"}},
		{file: "s3:\n  part_size: 1MiB\n", want: []string{"s3.part_size", "5MiB"}},
		{flags: []string{"--replicas", "3"}, want: []string{"flag --replicas", "jetstream.replicas", "needs a NATS cluster (nats.url)"}},
		{flags: []string{"--replicas", "7", "--nats-url", "nats://a:4222"}, want: []string{"jetstream.replicas", "1 to 5"}},
		{file: "metrics:\n  listen: nowhere\n", want: []string{"metrics.listen", "host:port", "off"}},
		{file: "gpus: 0,0\n", want: []string{"gpus", "device numbers"}},
		{env: map[string]string{"FZ_PIPELINE_COMPRESSORS": "0"}, want: []string{"environment FZ_PIPELINE_COMPRESSORS", "pipeline.compressors", "from 1 to 64"}},
		{env: map[string]string{"FZ_LOG_LEVEL": "loud"}, want: []string{"FZ_LOG_LEVEL", "debug, info, warn or error"}},
		{flags: []string{"--drain-timeout", "-1s"}, want: []string{"flag --drain-timeout", "pipeline.drain_timeout", "positive duration"}},
		{flags: []string{"--nats-listen", "4222"}, want: []string{"flag --nats-listen", "host:port"}},
		{flags: []string{"--subject-prefix", "a.b"}, want: []string{"nats.subject_prefix", "A-Z"}},
		{file: "gpu_device_lanes: 40\n", want: []string{"gpu_device_lanes", `"40"`, "auto or a number of lanes", "1 to 32"}},
		{flags: []string{"--gpu-device-lanes", "some"}, want: []string{"flag --gpu-device-lanes", "auto or a number of lanes"}},
		{file: "format_version: 3\n", want: []string{"c.yaml:1", "format_version", `"3"`, "container format version: 1 (the default) or 2"}},
		{flags: []string{"--format-version", "0"}, want: []string{"flag --format-version", "format_version", `"0"`, "1 (the default) or 2"}},
		{env: map[string]string{"FZ_FORMAT_VERSION": "x"}, want: []string{"environment FZ_FORMAT_VERSION", "format_version", `"x"`, "1 (the default) or 2"}},
	}
	for i, c := range cases {
		f := ""
		if c.file != "" {
			f = filepath.Join(dir, "c.yaml")
			os.WriteFile(f, []byte(c.file), 0o644)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		_, apply := Flags(fs)
		if err := fs.Parse(c.flags); err != nil {
			t.Fatal(err)
		}
		_, err := Load(f, env(c.env), apply)
		if err == nil {
			t.Errorf("case %d (%q %v %v): no error", i, c.file, c.env, c.flags)
			continue
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("case %d: %v does not match ErrConfig", i, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("case %d: error %q lacks %q", i, err, w)
			}
		}
	}
}

func TestSecretsNotEchoed(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(f, []byte("nats:\n  token: [s3cret]\n"), 0o644)
	_, err := Load(f, nil, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got %v", err)
	}
}

func TestValuesParsed(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(f, []byte("budget: 512MiB\ngpus: [0, 2]\njetstream:\n  ack_wait: 2s\nmetrics:\n  listen: off\nlog:\n  format: JSON\nempty:\n"), 0o644)
	_, err := Load(f, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("unknown empty key: %v", err)
	}
	os.WriteFile(f, []byte("budget: 512MiB\ngpus: [0, 2]\njetstream:\n  ack_wait: 2s\nmetrics:\n  listen: off\nlog:\n  format: JSON\n"), 0o644)
	s, err := Load(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Budget != 512<<20 || !reflect.DeepEqual(s.GPUs, []int{0, 2}) || s.AckWait != 2*time.Second || s.Metrics.Listen != "off" || s.Log.Format != "json" {
		t.Errorf("%+v", s)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil, nil); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestGPUDeviceLanes(t *testing.T) {
	for v, want := range map[string]int{"auto": 0, "0": 0, "3": 3, " 32 ": 32} {
		s := Defaults()
		if err := s.Set("gpu_device_lanes", v, "test"); err != nil || s.GPUDeviceLanes != want {
			t.Errorf("gpu_device_lanes %q: %d, %v; want %d", v, s.GPUDeviceLanes, err, want)
		}
	}
	if s := Defaults(); s.GPUDeviceLanes != 0 {
		t.Errorf("default %d, want 0 (auto)", s.GPUDeviceLanes)
	}
}

func TestSet(t *testing.T) {
	s := Defaults()
	if s.IsSet("pipeline.writers") {
		t.Fatal("a default counts as set")
	}
	if err := s.Set("pipeline.writers", "9", "test"); err != nil {
		t.Fatal(err)
	}
	if s.Pipeline.Writers != 9 || !s.IsSet("pipeline.writers") || s.Source("pipeline.writers") != "test" {
		t.Fatalf("after Set: writers %d, set %v, source %q", s.Pipeline.Writers, s.IsSet("pipeline.writers"), s.Source("pipeline.writers"))
	}
	if err := s.Set("pipeline.writers", "lots", "test"); err == nil || !strings.Contains(err.Error(), "pipeline.writers") {
		t.Fatalf("bad value: %v", err)
	}
	if err := s.Set("no.such.key", "1", "test"); err == nil || !strings.Contains(err.Error(), "no.such.key") {
		t.Fatalf("unknown key: %v", err)
	}
}

// format_version from each source: the default 1, and 2 from a file, the
// environment or a flag.
func TestFormatVersion(t *testing.T) {
	if d := Defaults(); d.FormatVersion != 1 {
		t.Fatalf("default format_version %d, want 1", d.FormatVersion)
	}
	fromEachSource(t, "format_version: 2", "FZ_FORMAT_VERSION", " 2 ", []string{"--format-version", "2"}, func(s Settings, src string) {
		if s.FormatVersion != 2 || s.Source("format_version") != src {
			t.Errorf("format_version %d from %q, want 2 from %q", s.FormatVersion, s.Source("format_version"), src)
		}
	})
	for _, v := range []string{"1", "2"} {
		if n, err := ParseFormatVersion(v); err != nil || strconv.Itoa(n) != v {
			t.Errorf("ParseFormatVersion(%q) = %d, %v", v, n, err)
		}
	}
	// The same versions the codec writes (fz.FormatVersionOf), 0 (the
	// codec's "default") aside: a setting says a version.
	for v := 1; v <= 4; v++ {
		_, cerr := fz.FormatVersionOf(fz.WithFormatVersion(v))
		if _, err := ParseFormatVersion(strconv.Itoa(v)); (err == nil) != (cerr == nil) {
			t.Errorf("version %d: config says %v, the codec %v", v, err, cerr)
		}
	}
	if d := Defaults(); d.FormatVersion != fz.DefaultVersion {
		t.Errorf("default format_version %d, the codec's default %d", d.FormatVersion, fz.DefaultVersion)
	}
	for _, v := range []string{"0", "3", "-1", "x", "", "1.5", "65537"} {
		if _, err := ParseFormatVersion(v); err == nil || !strings.Contains(err.Error(), "1 (the default) or 2") {
			t.Errorf("ParseFormatVersion(%q): %v", v, err)
		}
	}
}

// tiling from each source: the default boxes, and flat from a file, the
// environment or a flag; the values are the codec's (fz.ParseTiling).
func TestTiling(t *testing.T) {
	if d := Defaults(); d.Tiling != "boxes" {
		t.Fatalf("default tiling %q, want boxes", d.Tiling)
	}
	fromEachSource(t, "tiling: flat", "FZ_TILING", " Flat ", []string{"--tiling", "flat"}, func(s Settings, src string) {
		if s.Tiling != "flat" || s.Source("tiling") != src {
			t.Errorf("tiling %q from %q, want flat from %q", s.Tiling, s.Source("tiling"), src)
		}
	})
	for _, v := range []string{"boxes", "flat", "auto", "padded", "BOXES", " auto", " Padded", "", "box", "flat-tiles", "pad", "0", "1", "2", "3", "cubes"} {
		got, err := ParseTiling(v)
		ct, cerr := fz.ParseTiling(v)
		if (err == nil) != (cerr == nil) || (err == nil && got != ct.String()) {
			t.Errorf("tiling %q: config says %q, %v; the codec %v, %v", v, got, err, ct, cerr)
		}
		if err != nil && !strings.Contains(err.Error(), "boxes (the default), flat, auto or padded") {
			t.Errorf("ParseTiling(%q): %v", v, err)
		}
	}
	if Tilings != fz.Tilings {
		t.Errorf("config.Tilings %q, fz.Tilings %q", Tilings, fz.Tilings)
	}
	if d, err := fz.ParseTiling(Defaults().Tiling); err != nil || d != fz.TilingBoxes {
		t.Errorf("default tiling %q is not the codec's default", Defaults().Tiling)
	}
}

// fromEachSource loads the settings with one setting given by a config
// file (yaml, one line), by the environment (key = val) and by flags, one
// source at a time, and hands check each result with the source it must
// name (Settings.Source).
func fromEachSource(t *testing.T, yaml, key, val string, flags []string, check func(s Settings, src string)) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(f, []byte(yaml+"\n"), 0o644)
	for _, c := range []struct {
		file  string
		env   map[string]string
		flags []string
		src   string
	}{
		{file: f, src: f + ":1"},
		{env: map[string]string{key: val}, src: "environment " + key},
		{flags: flags, src: "flag " + flags[0]},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		_, apply := Flags(fs)
		if err := fs.Parse(c.flags); err != nil {
			t.Fatal(err)
		}
		s, err := Load(c.file, env(c.env), apply)
		if err != nil {
			t.Fatal(err)
		}
		check(s, c.src)
	}
}
