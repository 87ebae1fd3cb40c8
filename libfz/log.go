package main

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// LogEnv is the environment variable that lets libfz log. A library must
// not write to its host process's stderr uninvited (a Python notebook, an
// HDF5 tool or a simulation owns it), so by default libfz's log — the
// sinks' warnings about retried S3 requests or skipped catalog objects —
// is discarded; errors reach the caller through status codes and
// fz_last_error either way.
//
//	FZ_LIBFZ_LOG unset, "" or "0": nothing is written
//	FZ_LIBFZ_LOG=1 (or "warn"):     warnings and errors to stderr
//	FZ_LIBFZ_LOG=info / debug:      also information / debugging lines
const LogEnv = "FZ_LIBFZ_LOG"

// logger is libfz's logger, chosen once from LogEnv when the library loads.
var logger = newLogger(os.Getenv(LogEnv), os.Stderr)

func init() {
	// Also for any package that logs through slog.Default (or the log
	// package, which slog.SetDefault redirects): libfz is its own Go
	// runtime, so this changes nothing outside the library.
	slog.SetDefault(logger)
}

func newLogger(setting string, w io.Writer) *slog.Logger {
	var level slog.Level
	switch strings.ToLower(strings.TrimSpace(setting)) {
	case "", "0", "off", "false", "no":
		return slog.New(slog.DiscardHandler)
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	default: // "1", "warn", anything else that asks for a log
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
