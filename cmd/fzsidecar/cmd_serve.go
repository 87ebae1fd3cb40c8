package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/fzsidecar/fzsidecar/sidecar"
)

func init() {
	register(&command{name: "serve", summary: "run the sidecar: take shared-memory snapshots from NATS, compress, store", run: runServe})
}

func runServe(ctx context.Context, args []string) error {
	fs := newFlags("serve", "serve [--nats-listen ADDR | --nats-url URL] [--shm-dir DIR] [--sink URL] [--backend auto|cpu|gpu] [flags]")
	var nf natsFlags
	nf.register(fs, "external NATS server URL (nats://host:4222[,nats://...]); default: run an embedded server on --nats-listen")
	listen := fs.String("nats-listen", "127.0.0.1:4222", "address of the embedded NATS server (ignored with --nats-url)")
	dataDir := fs.String("data-dir", ".fzsidecar", "state directory; the embedded server's JetStream store lives in DATA-DIR/jetstream and must persist across restarts")
	shmDir := fs.String("shm-dir", ingest.DefaultShmDir, "directory of shared-memory segments; only files inside it are ever mapped")
	sinkURL := fs.String("sink", "./fzdata", sinkHelp)
	backend := fs.String("backend", "auto", "codec backend: auto, cpu or gpu")
	budget := fs.String("budget", "4GiB", "byte budget for snapshots in flight (admitted or queued, not yet stored); also the largest accepted snapshot")
	maxBlock := fs.Duration("max-block", 10*time.Minute, "longest a producer with the block policy may wait for budget")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Minute, "how long an admission is reserved before its notification must arrive")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "JetStream ack wait: after a crash, unfinished snapshots are redelivered this long after their last sign of life")
	dedup := fs.Duration("dedup-window", 10*time.Minute, "JetStream duplicate window for Nats-Msg-Id")
	resultTTL := fs.Duration("result-ttl", 24*time.Hour, "how long results stay in the result stream for late readers")
	maxQueued := fs.Int64("max-queued", 100000, "most notifications queued in the stream; beyond it publishes are refused")
	maxDeliver := fs.Int("max-deliver", 0, "give up (error reply) on a snapshot after this many deliveries; 0: never")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected argument %q", pos[0])
	}
	if err := nf.check(fs); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["nats-url"] && set["nats-listen"] {
		return usageErr(fs, "--nats-listen configures the embedded server; it cannot be combined with --nats-url")
	}
	budgetBytes, err := parseSize(*budget)
	if err != nil {
		return usageErr(fs, "--budget: %v", err)
	}
	for name, d := range map[string]time.Duration{"max-block": *maxBlock, "lease-ttl": *leaseTTL, "ack-wait": *ackWait, "dedup-window": *dedup, "result-ttl": *resultTTL} {
		if err := positiveDuration(fs, name, d); err != nil {
			return err
		}
	}
	if *maxQueued <= 0 {
		return usageErr(fs, "--max-queued %d: expected a positive count", *maxQueued)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageErr(fs, "--log-level %q: expected debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts, backendName, err := selectBackend(*backend)
	if err != nil {
		return usageErr(fs, "%v", err)
	}
	sink, err := openSink(ctx, *sinkURL)
	if err != nil {
		return fmt.Errorf("open sink: %w", err)
	}
	defer sink.Close()
	log.Info("starting", "sink", sink.String(), "backend", backendName)

	cfg := sidecar.Config{
		Embedded: nf.url == "", Listen: *listen, DataDir: *dataDir, TLSCert: nf.tlsCert, TLSKey: nf.tlsKey,
		Conn: nf.conn("fzsidecar serve"),
		Receiver: ingest.ReceiverConfig{
			Subjects: nf.subjects(), ShmDir: *shmDir, Budget: budgetBytes, MaxBlock: *maxBlock, LeaseTTL: *leaseTTL,
			AckWait: *ackWait, MaxDeliver: *maxDeliver,
			Streams: ingest.StreamConfig{DedupWindow: *dedup, MaxQueued: *maxQueued, ResultTTL: *resultTTL},
		},
		Pipeline: pipeline.Config{Store: pipeline.SinkStore(sink), Codec: pipeline.FZ(opts...)},
		Log:      log,
		Ready: func(url string) {
			// One line on stdout that scripts can wait for.
			fmt.Printf("fzsidecar ready: nats %s, shm %s, sink %s\n", strings.TrimSpace(url), *shmDir, sink.String())
		},
	}
	return sidecar.Run(ctx, cfg)
}
