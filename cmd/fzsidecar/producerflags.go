package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/nats-io/nats.go"
)

// producerFlags are shared by publish and simulate.
type producerFlags struct {
	nats           natsFlags
	shmDir         string
	id             string
	policy         string
	blockFor       time.Duration
	connectTimeout time.Duration
}

func (p *producerFlags) register(fs *flag.FlagSet) {
	p.nats.register(fs, "NATS server URL of the sidecar (default: the url in the sidecar's credentials file <shm-dir>/"+ingest.LocalAuthFile+", else "+ingest.DefaultURL+")")
	fs.StringVar(&p.shmDir, "shm-dir", ingest.DefaultShmDir, "shared-memory directory: must be the sidecar's --shm-dir")
	fs.StringVar(&p.id, "producer", "", "producer id (default <hostname>-<pid>)")
	fs.StringVar(&p.policy, "policy", "block", "when the sidecar's budget is full: block (wait up to --block-timeout) or fail (give up at once)")
	fs.DurationVar(&p.blockFor, "block-timeout", time.Minute, "longest wait for budget with --policy block")
	fs.DurationVar(&p.connectTimeout, "connect-timeout", 30*time.Second, "longest wait for the sidecar to answer (its NATS server, then the sidecar itself), with progress on stderr")
}

// waitProgress is how soon, then how often, a wait for the sidecar says so.
var waitProgress = struct{ first, every time.Duration }{time.Second, 3 * time.Second}

// check reports a bad flag as a usage error (open calls it too).
func (p *producerFlags) check(fs *flag.FlagSet) (ingest.Policy, error) {
	if err := p.nats.check(fs); err != nil {
		return 0, err
	}
	pol, err := ingest.ParsePolicy(p.policy)
	if err != nil {
		return 0, usageErr(fs, "--policy: %v", err)
	}
	if err := positiveDuration(fs, "block-timeout", p.blockFor); err != nil {
		return 0, err
	}
	if err := positiveDuration(fs, "connect-timeout", p.connectTimeout); err != nil {
		return 0, err
	}
	if p.id != "" && !ingest.ValidToken(p.id) {
		return 0, usageErr(fs, "--producer %q: expected 1-128 characters of A-Z a-z 0-9 _ -", p.id)
	}
	return pol, nil
}

func (p *producerFlags) open(ctx context.Context, fs *flag.FlagSet, name string) (*ingest.Producer, *nats.Conn, error) {
	pol, err := p.check(fs)
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	co := p.nats.conn(name)
	co.Log = log
	co.ShmDir = p.shmDir // zero-config credentials (docs/PROTOCOL.md section 1)
	url := co.URL
	if url == "" {
		// Where Connect will look: a zero-config sidecar's credentials
		// file names its server.
		if c, _ := ingest.ReadLocalCredentials(p.shmDir); c != nil && c.URL != "" {
			url = c.URL
		} else {
			url = ingest.DefaultURL
		}
	}
	url = redactURL(url)
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, p.connectTimeout)
	defer cancel()
	w := &waiter{out: os.Stderr, cmd: fs.Name(), start: start, limit: p.connectTimeout}

	nc, err := waitFor(cctx, w, "the sidecar's NATS server at "+url, func(ctx context.Context) (*nats.Conn, error) {
		return ingest.Connect(ctx, co)
	})
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return nil, nil, fmt.Errorf("no sidecar reachable at %s after %s: %w\n"+
				"  Is 'fzsidecar serve' running on this node? Start it, or point --nats-url at its NATS server (--connect-timeout waits longer)",
				url, roundSec(time.Since(start)), err)
		}
		return nil, nil, err
	}
	prod, err := ingest.NewProducer(cctx, nc, ingest.ProducerOptions{ID: p.id, Subjects: p.nats.subjects(),
		ShmDir: p.shmDir, Policy: pol, BlockTimeout: p.blockFor, Log: log})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	// A NATS server can be up without a sidecar on it (an external server,
	// or another --subject-prefix): ask the sidecar itself, so that a
	// snapshot is not left waiting for an admission nobody will grant.
	statusSubj := p.nats.subjects().Status()
	_, err = waitFor(cctx, w, "a sidecar to answer on "+statusSubj+" (the NATS server at "+url+" is up)", func(ctx context.Context) (*ingest.Status, error) {
		for {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := prod.Status(rctx)
			rcancel()
			if err == nil || !retryableStatusErr(err) || ctx.Err() != nil {
				return st, err
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	if err != nil {
		prod.Close()
		nc.Close()
		if ctx.Err() == nil && cctx.Err() != nil || retryableStatusErr(err) {
			return nil, nil, fmt.Errorf("the NATS server at %s is up, but no sidecar answered on %s within %s: %w\n"+
				"  Is 'fzsidecar serve' running with --subject-prefix %s against this server?", url, statusSubj, roundSec(time.Since(start)), err, p.nats.prefix)
		}
		return nil, nil, fmt.Errorf("asking the sidecar for its status on %s: %w", statusSubj, err)
	}
	return prod, nc, nil
}

// retryableStatusErr: nobody answered yet (as opposed to, say, a
// permissions violation, which waiting will not fix).
func retryableStatusErr(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// waiter prints progress while a command waits for the sidecar: a first
// line after waitProgress.first, then one every waitProgress.every, so a
// user never stares at a silent terminal.
type waiter struct {
	out   io.Writer
	cmd   string
	start time.Time
	limit time.Duration
	said  bool
}

// waitFor runs f and, until it returns, reports what is being waited for.
func waitFor[T any](ctx context.Context, w *waiter, what string, f func(context.Context) (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := f(ctx)
		done <- res{v, err}
	}()
	first := time.NewTimer(waitProgress.first)
	defer first.Stop()
	var tick <-chan time.Time
	for {
		select {
		case r := <-done:
			if w.said && r.err == nil {
				fmt.Fprintf(w.out, "fzsidecar %s: connected after %s\n", w.cmd, roundSec(time.Since(w.start)))
				w.said = false
			}
			return r.v, r.err
		case <-first.C:
			t := time.NewTicker(waitProgress.every)
			defer t.Stop()
			tick = t.C
			w.say(what, true)
		case <-tick:
			w.say(what, false)
		}
	}
}

func (w *waiter) say(what string, first bool) {
	el := roundSec(time.Since(w.start))
	if first {
		fmt.Fprintf(w.out, "fzsidecar %s: waiting for %s (%s; giving up after %s, see --connect-timeout)...\n", w.cmd, what, el, w.limit)
	} else {
		fmt.Fprintf(w.out, "fzsidecar %s: still waiting for %s (%s)...\n", w.cmd, what, el)
	}
	w.said = true
}

func roundSec(d time.Duration) time.Duration { return d.Round(time.Second) }

// redactURL hides a password embedded in a NATS URL.
func redactURL(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "***" + url[i:]
		}
	}
	return url
}
