package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// Assembled is a Config built from Settings plus what must be closed after
// Run returns.
type Assembled struct {
	Config
	Sink        sinks.Sink
	BackendName string
	// GPU is the GPU direct codec, if the GPU backend was chosen (its
	// Stats say how snapshots reached the devices).
	GPU     *pipeline.GPU
	closers []io.Closer
}

// Close releases the sink and any GPU backends.
func (a *Assembled) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i].Close())
	}
	return errors.Join(errs...)
}

// NewLogger makes the structured logger the settings ask for.
func NewLogger(w io.Writer, s config.Settings) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.Log.Level)) // validated by config
	o := &slog.HandlerOptions{Level: level}
	if s.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// FromSettings opens the sink and the codec backend(s) and assembles the
// sidecar's Config. Close the result after Run.
func FromSettings(ctx context.Context, s config.Settings, log *slog.Logger) (*Assembled, error) {
	a := &Assembled{}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	cc, err := openCodec(s, log, a)
	if err != nil {
		return nil, err
	}
	a.BackendName = cc.name
	compressors := s.Pipeline.Compressors
	if cc.lanes > compressors && !s.IsSet("pipeline.compressors") {
		compressors = cc.lanes // keep every GPU lane busy
	}
	// A GPU stores a snapshot every few milliseconds: with 4 writers a
	// tmpfs sink held one H200 to 0.73 of its PCIe rate, with 8 it kept up
	// (0.96; bench e2e, docs/PIPELINE.md).
	writers := s.Pipeline.Writers
	// Two per host lane: the device lanes' output is a twelfth of theirs
	// (before device lanes existed, 2 x 4 lanes gave the 8 measured).
	if 2*cc.hostLanes > writers && !s.IsSet("pipeline.writers") {
		writers = 2 * cc.hostLanes
	}
	sinkLog := log.With("component", "sink")
	sink, err := sinks.Open(ctx, s.Sink, sinks.WithLogger(sinkLog), sinks.WithS3(sinks.S3Config{
		Endpoint: s.S3.Endpoint, Region: s.S3.Region, PartSize: uint64(s.S3.PartSize), Threads: uint(s.S3.Threads),
		ConnectTimeout: s.S3.ConnectTimeout, StallTimeout: s.S3.StallTimeout, RequestTimeout: s.S3.RequestTimeout,
	}))
	if err != nil {
		return nil, fmt.Errorf("sink %s (%s): %w", s.Sink, s.Source("sink"), err)
	}
	a.Sink = sink
	a.closers = append(a.closers, sink)
	if err := sinks.CheckWritable(ctx, sink); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, s.Source("sink"))
	}
	n := s.NATS
	conn := ingest.ConnOptions{URL: n.URL, Name: "fzsidecar serve", Token: n.Token, User: n.User, Password: n.Password,
		NkeySeedFile: n.NkeyFile, CredsFile: n.CredsFile, TLSCA: n.TLSCA, TLSCert: n.TLSCert, TLSKey: n.TLSKey}
	a.Config = Config{
		Embedded: n.URL == "", Listen: n.Listen, DataDir: s.DataDir, TLSCert: n.TLSCert, TLSKey: n.TLSKey,
		// Secure by default: with nothing configured, only this user's
		// producers may connect (docs/PROTOCOL.md §1). Explicit
		// credentials, TLS or an external server keep their own rules.
		LocalAuth: n.URL == "" && n.Token == "" && n.User == "" && n.Password == "" && n.NkeyFile == "" &&
			n.CredsFile == "" && n.TLSCert == "",
		Conn: conn,
		Receiver: ingest.ReceiverConfig{
			Subjects: ingest.Subjects{Prefix: n.SubjectPrefix}, ShmDir: s.ShmDir, Budget: s.Budget,
			MaxBlock: s.MaxBlock, LeaseTTL: s.LeaseTTL, AckWait: s.AckWait, MaxDeliver: s.MaxDeliver,
			Streams:  ingest.StreamConfig{DedupWindow: s.DedupWindow, MaxQueued: s.MaxQueued, ResultTTL: s.ResultTTL, Replicas: s.Replicas},
			Features: cc.features,
		},
		Pipeline: pipeline.Config{
			Store: pipeline.SinkStore(sink), Codec: cc.codec, Direct: cc.direct, Device: cc.device, Release: cc.release,
			Compressors: compressors, Writers: writers, Queue: s.Pipeline.Queue,
			DrainTimeout: s.Pipeline.DrainTimeout,
		},
		Log:            log,
		MetricsListen:  s.Metrics.Listen,
		MetricsDefault: !s.IsSet("metrics.listen"),
	}
	ok = true
	return a, nil
}

// codecChoice is what openCodec picked: the CPU codec, or the GPU direct
// codec over one streamer per device.
type codecChoice struct {
	codec  pipeline.Codec
	direct pipeline.DirectCodec
	device pipeline.DeviceCodec // GPU-resident snapshots (cuda_ipc)
	// features the receiver advertises (ingest.FeatureCUDAIPC)
	features []string
	release  func([]byte)
	lanes    int // snapshots the backend compresses at once (GPU lanes)
	// hostLanes: the lanes of snapshots in host memory, whose whole field
	// goes through the sink's writers; GPU-resident snapshots have lanes
	// of their own (pipeline.GPU.Lanes counts both)
	hostLanes int
	name      string
}

// openCodec resolves backend and gpus: the CPU codec, or the GPU direct
// path (segments pinned in place, several streams per snapshot, one
// pipeline per device).
func openCodec(s config.Settings, log *slog.Logger, a *Assembled) (codecChoice, error) {
	var opts []fz.Option
	if s.Pipeline.CodecThreads > 0 {
		opts = append(opts, fz.WithWorkers(s.Pipeline.CodecThreads))
	}
	if s.FormatVersion != 0 {
		// Both backends take it: pipeline.FZ passes it to fz.Compress, the
		// GPU lanes to cuda.Streamer.Compress (fz.SettingsOf).
		opts = append(opts, fz.WithFormatVersion(s.FormatVersion))
	}
	if s.Tiling != "" {
		// As format_version: pipeline.FZ passes it to fz.Compress, the GPU
		// lanes read fz.SettingsOf(...).Tiling.
		t, err := fz.ParseTiling(s.Tiling)
		if err != nil {
			return codecChoice{}, fmt.Errorf("tiling (%s): %w", s.Source("tiling"), err)
		}
		opts = append(opts, fz.WithTiling(t))
	}
	cpu := codecChoice{codec: pipeline.FZ(opts...), name: "cpu"}
	want := strings.ToLower(s.Backend)
	if want == "cpu" {
		log.Info("backend cpu")
		return cpu, nil
	}
	if ok, err := cuda.Available(); !ok {
		if want == "auto" {
			log.Info("backend auto: cpu", "reason", "GPU unavailable: "+err.Error())
			return cpu, nil
		}
		return codecChoice{}, fmt.Errorf("backend gpu (%s): %w", s.Source("backend"), err)
	}
	devs := s.GPUs
	if len(devs) == 0 {
		devs = []int{0}
	}
	all := len(devs) == 1 && devs[0] == -1
	if all {
		devs = nil
		for d := 0; d < 256; d++ {
			devs = append(devs, d)
		}
	}
	var streamers []*cuda.Streamer
	var names []string
	for _, d := range devs {
		st, err := cuda.NewStreamer(d, cuda.StreamOptions{ArenaBytes: uint64(s.GPUArena), Lanes: s.GPULanes, DeviceLanes: s.GPUDeviceLanes})
		if err != nil {
			if all && len(streamers) > 0 {
				break // past the last device
			}
			for _, x := range streamers {
				x.Close()
			}
			if want == "auto" {
				log.Info("backend auto: cpu", "reason", err.Error())
				return cpu, nil
			}
			return codecChoice{}, fmt.Errorf("backend gpu, device %d (%s): %w", d, s.Source("gpus"), err)
		}
		a.closers = append(a.closers, st)
		streamers = append(streamers, st)
		names = append(names, st.Name())
	}
	g := pipeline.NewGPU(streamers, pipeline.GPUOptions{Host: pipeline.HostMode(s.GPUHost), Log: log, Codec: opts})
	a.closers = append(a.closers, g) // closed before the streamers
	a.GPU = g
	log.Info("backend "+want+": gpu", "devices", strings.Join(names, "; "), "lanes", g.Lanes(), "host", s.GPUHost)
	return codecChoice{direct: g.Direct, device: g.Device, features: g.Features(), release: g.Release, lanes: g.Lanes(), hostLanes: g.HostLanes(), name: strings.Join(names, "; ")}, nil
}
