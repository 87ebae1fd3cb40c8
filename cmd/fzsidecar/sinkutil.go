package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/fzsidecar/fzsidecar/sinks"
)

// sinkHelp is appended to the --sink flag's help of every sink command.
const sinkHelp = "sink URL: file:///path, a path, or s3://bucket/prefix (S3 endpoint and credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)"

func openSink(ctx context.Context, url string) (sinks.Sink, error) {
	return sinks.Open(ctx, url, sinks.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
}

// keyFlags are the --run, --var and --step flags shared by commands.
type keyFlags struct {
	sink, run, v, step string
}

func (k *keyFlags) register(fs *flag.FlagSet, withVar, withStep bool) {
	fs.StringVar(&k.sink, "sink", "", sinkHelp)
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
	vals := map[string]string{"sink": k.sink, "run": k.run, "var": k.v, "step": k.step}
	for _, n := range names {
		if vals[n] == "" {
			return usageErr(fs, "--%s is required", n)
		}
	}
	return nil
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
