// Package config holds the sidecar's user-facing settings and loads them
// from four layers, each overriding the one before:
//
//	defaults < YAML file (--config or $FZ_CONFIG) < environment ($FZ_…) < command-line flags
//
// One table (table.go) names every setting once: its YAML key, its
// environment variable, its flag, its help and its parser, so the three
// sources can never disagree on names or on what a value means. Every error
// names the source (file and line, variable, or flag), the key, the value
// and what was expected.
package config

import (
	"fmt"
	"time"
)

// Settings is everything `fzsidecar serve` can be told.
type Settings struct {
	NATS struct {
		Listen        string // embedded server address; setting it together with URL is an error
		URL           string // external server(s); empty: embedded
		SubjectPrefix string
		Token         string
		User          string
		Password      string
		NkeyFile      string
		CredsFile     string
		TLSCA         string
		TLSCert       string
		TLSKey        string
	}
	ShmDir  string
	DataDir string
	Sink    string
	Backend string
	// FormatVersion is the container version the codec writes: 1 (the
	// default) or 2 (docs/FORMAT.md; smaller, read by fzsidecar releases
	// with version-2 support only).
	FormatVersion int
	// Tiling is the tile geometry the codec writes: boxes (the default),
	// flat, auto or padded (docs/FORMAT.md §3.1, §3.2; fz.ParseTiling
	// reads it).
	Tiling string
	// GPUs lists device ordinals for --backend gpu: one compression lane
	// per device. Empty: device 0.
	GPUs []int
	// GPUHost is how snapshots reach a GPU: register (page-lock the
	// segment, cached while the producer reuses it; staging where that
	// fails) or stage (always through a pinned staging ring).
	GPUHost string
	// GPUArena is each GPU lane's device input buffer in bytes; 0 sizes it
	// from the device's memory.
	GPUArena int64
	// GPULanes is how many snapshots each GPU compresses at once.
	GPULanes int
	// GPUDeviceLanes is how many GPU-resident snapshots (CUDA IPC) each GPU
	// compresses at once, on lanes of their own; 0 picks from the device's
	// memory (cuda.StreamOptions.DeviceLanes).
	GPUDeviceLanes int

	Budget int64

	MaxBlock time.Duration
	LeaseTTL time.Duration

	AckWait     time.Duration
	DedupWindow time.Duration
	ResultTTL   time.Duration
	MaxQueued   int64
	MaxDeliver  int
	// Replicas is how many servers of a NATS cluster keep each stream
	// (1, or 3 for a 3-server cluster: one server may die without losing
	// a queued snapshot). Only for an external cluster (nats.url).
	Replicas int

	Pipeline struct {
		Compressors  int
		Writers      int
		Queue        int
		CodecThreads int // fz workers per snapshot; 0: all cores
		DrainTimeout time.Duration
	}

	Metrics struct {
		Listen string // host:port, or "off"
	}

	Log struct {
		Level  string // debug, info, warn, error
		Format string // text or json
	}

	// S3 settings for s3:// sinks; credentials only ever come from the
	// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
	S3 struct {
		Endpoint string
		Region   string
		PartSize int64
		Threads  int
		// Timeouts of each S3 request (0: the sink's defaults, see
		// sinks.S3Config).
		ConnectTimeout, StallTimeout, RequestTimeout time.Duration
	}

	// set records which keys a file, the environment or a flag gave, for
	// rules like "nats.url and nats.listen exclude each other".
	set map[string]string
}

// Defaults are the zero-config values: embedded NATS on loopback, shm in
// /dev/shm/fzsidecar, local sink ./fzdata, backend auto.
func Defaults() Settings {
	var s Settings
	s.NATS.Listen = "127.0.0.1:4222"
	s.NATS.SubjectPrefix = "fz"
	s.ShmDir = "/dev/shm/fzsidecar"
	s.DataDir = ".fzsidecar"
	s.Sink = "./fzdata"
	s.Backend = "auto"
	s.FormatVersion = 1
	s.Tiling = "boxes"
	s.GPUHost = "register"
	s.GPULanes = 4
	s.Budget = 4 << 30
	s.MaxBlock = 10 * time.Minute
	s.LeaseTTL = time.Minute
	s.AckWait = 30 * time.Second
	s.MaxDeliver = 10
	s.DedupWindow = 10 * time.Minute
	s.ResultTTL = 24 * time.Hour
	s.MaxQueued = 100000
	s.Replicas = 1
	s.Pipeline.Compressors = 2
	s.Pipeline.Writers = 4
	s.Pipeline.Queue = 4
	s.Pipeline.DrainTimeout = 20 * time.Second
	s.Metrics.Listen = DefaultMetricsListen
	s.Log.Level = "info"
	s.Log.Format = "text"
	return s
}

// DefaultMetricsListen is where /metrics and /healthz are served unless
// configured. If it is busy, serve falls back to a free port (and says so)
// rather than refusing to start over an optional endpoint; an explicitly
// configured address that is busy is an error.
const DefaultMetricsListen = "127.0.0.1:9464"

// Source says where a key's value came from: "default", a file position,
// an environment variable or a flag.
func (s *Settings) Source(key string) string {
	if src, ok := s.set[key]; ok {
		return src
	}
	return "default"
}

// IsSet reports whether key was given by a file, the environment or a flag.
func (s *Settings) IsSet(key string) bool { _, ok := s.set[key]; return ok }

// Set parses value into key as a file, the environment or a flag would,
// recording source; for programs that build Settings themselves (bench).
func (s *Settings) Set(key, value, source string) error {
	e := lookup(key)
	if e == nil {
		return fmt.Errorf("unknown setting %q", key)
	}
	return set(s, e, value, source)
}
