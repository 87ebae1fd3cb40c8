package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// sinkHelp is the --sink flag's help of every sink command.
const sinkHelp = "sink URL: file:///path, a path, or s3://bucket/prefix (default: the sink serve uses: $FZ_SINK, else sink: in --config, else ./fzdata)"

// keyFlags are the sink and --run, --var, --step flags shared by ls, get,
// restore and put. The sink and its S3 settings come from the same layers
// as serve's (flags > FZ_* environment > --config file > defaults), so that
// `fzsidecar ls` with no flags reads where `fzsidecar serve` with no flags
// writes.
type keyFlags struct {
	sink, config, s3Endpoint, s3Region string
	run, v, step                       string
}

func (k *keyFlags) register(fs *flag.FlagSet, withVar, withStep bool) {
	fs.StringVar(&k.sink, "sink", "", sinkHelp)
	fs.StringVar(&k.config, "config", "", "serve's YAML configuration file: its sink and s3 settings are used (default $FZ_CONFIG)")
	fs.StringVar(&k.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for s3:// sinks, e.g. http://127.0.0.1:9000 (default $FZ_S3_ENDPOINT, s3.endpoint in --config, $AWS_ENDPOINT_URL, else AWS); credentials only from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	fs.StringVar(&k.s3Region, "s3-region", "", "S3 region (default $FZ_S3_REGION, s3.region in --config, $AWS_REGION, else us-east-1)")
	fs.StringVar(&k.run, "run", "", "run name")
	if withVar {
		fs.StringVar(&k.v, "var", "", "variable name")
	}
	if withStep {
		fs.StringVar(&k.step, "step", "", "step number, or latest")
	}
}

// require reports the first missing flag as a usage error.
func (k *keyFlags) require(fs *flag.FlagSet, names ...string) error {
	vals := map[string]string{"run": k.run, "var": k.v, "step": k.step}
	for _, n := range names {
		if vals[n] == "" {
			return usageErr(fs, "--%s is required", n)
		}
	}
	return nil
}

// settings resolves the sink and its S3 settings as serve would.
func (k *keyFlags) settings(fs *flag.FlagSet) (config.Settings, error) {
	path := k.config
	if path == "" {
		path = os.Getenv("FZ_CONFIG")
	}
	s, err := config.Load(path, os.Getenv, func(s *config.Settings) error {
		return config.Set(s, map[string]string{"sink": k.sink, "s3.endpoint": k.s3Endpoint, "s3.region": k.s3Region}, "flag")
	})
	if err != nil {
		return s, configErr(fs.Name(), err)
	}
	return s, nil
}

// openSink opens the sink the flags, environment and config name. With
// mustExist (commands that only read), a local sink whose directory does
// not exist is an error naming where the sink setting came from, not an
// empty listing: the usual cause is a sink path that differs from serve's.
func (k *keyFlags) openSink(ctx context.Context, fs *flag.FlagSet, mustExist bool) (sinks.Sink, error) {
	st, err := k.settings(fs)
	if err != nil {
		return nil, err
	}
	s, err := sinks.Open(ctx, st.Sink,
		sinks.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		sinks.WithS3(sinks.S3Config{Endpoint: st.S3.Endpoint, Region: st.S3.Region, PartSize: uint64(st.S3.PartSize), Threads: uint(st.S3.Threads),
			ConnectTimeout: st.S3.ConnectTimeout, StallTimeout: st.S3.StallTimeout, RequestTimeout: st.S3.RequestTimeout}))
	if err != nil {
		return nil, fmt.Errorf("sink %s (%s): %w", st.Sink, st.Source("sink"), err)
	}
	if root, local := strings.CutPrefix(s.String(), "file://"); local && mustExist {
		if _, err := os.Stat(filepath.FromSlash(root)); errors.Is(err, iofs.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("sink %s does not exist (sink %q from %s): give the sink serve writes to with --sink, $FZ_SINK or --config", filepath.FromSlash(root), st.Sink, sinkSource(st))
		}
	}
	return s, nil
}

// sinkSource says where the sink setting came from, in words.
func sinkSource(st config.Settings) string {
	if src := st.Source("sink"); src != "default" {
		return src
	}
	return "the default"
}

// resolveStep turns --step (a number or latest) into a step; for latest,
// variable may be "" to mean any variable of the run.
func resolveStep(ctx context.Context, s sinks.Sink, run, variable, step string) (uint64, error) {
	n, latest, err := sinks.ParseStep(step)
	if err != nil {
		return 0, err
	}
	if !latest {
		return n, nil
	}
	return sinks.Latest(ctx, s, run, variable)
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
