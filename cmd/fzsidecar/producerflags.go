package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/nats-io/nats.go"
)

// producerFlags are shared by publish and simulate.
type producerFlags struct {
	nats     natsFlags
	shmDir   string
	id       string
	policy   string
	blockFor time.Duration
}

func (p *producerFlags) register(fs *flag.FlagSet) {
	p.nats.register(fs, "NATS server URL of the sidecar (default "+ingest.DefaultURL+")")
	fs.StringVar(&p.shmDir, "shm-dir", ingest.DefaultShmDir, "shared-memory directory: must be the sidecar's --shm-dir")
	fs.StringVar(&p.id, "producer", "", "producer id (default <hostname>-<pid>)")
	fs.StringVar(&p.policy, "policy", "block", "when the sidecar's budget is full: block (wait up to --block-timeout) or fail (give up at once)")
	fs.DurationVar(&p.blockFor, "block-timeout", time.Minute, "longest wait for budget with --policy block")
}

func (p *producerFlags) open(ctx context.Context, fs *flag.FlagSet, name string) (*ingest.Producer, *nats.Conn, error) {
	if err := p.nats.check(fs); err != nil {
		return nil, nil, err
	}
	pol, err := ingest.ParsePolicy(p.policy)
	if err != nil {
		return nil, nil, usageErr(fs, "--policy: %v", err)
	}
	if err := positiveDuration(fs, "block-timeout", p.blockFor); err != nil {
		return nil, nil, err
	}
	if p.id != "" && !ingest.ValidToken(p.id) {
		return nil, nil, usageErr(fs, "--producer %q: expected 1-128 characters of A-Z a-z 0-9 _ -", p.id)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	co := p.nats.conn(name)
	co.Log = log
	co.ShmDir = p.shmDir // zero-config credentials (docs/PROTOCOL.md section 1)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nc, err := ingest.Connect(cctx, co)
	if err != nil {
		return nil, nil, err
	}
	prod, err := ingest.NewProducer(cctx, nc, ingest.ProducerOptions{ID: p.id, Subjects: p.nats.subjects(),
		ShmDir: p.shmDir, Policy: pol, BlockTimeout: p.blockFor, Log: log})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return prod, nc, nil
}
