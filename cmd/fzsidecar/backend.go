package main

import (
	"log/slog"
	"strings"

	"github.com/fzsidecar/fzsidecar/backend"
	"github.com/fzsidecar/fzsidecar/fz"
)

// selectBackend resolves --backend to codec options and a short name for
// reports ("cpu" or the GPU's name). auto says on stderr's log why it did
// not take the GPU.
func selectBackend(name string) ([]fz.Option, string, error) {
	b, why, err := backend.Select(name)
	if err != nil {
		return nil, "", err
	}
	slog.Debug(why)
	if strings.Contains(why, "GPU unavailable") {
		// The full reason lists every path tried; one line is enough here.
		short, _, _ := strings.Cut(why, "; tried:")
		short += strings.Repeat(")", max(0, strings.Count(short, "(")-strings.Count(short, ")")))
		slog.Info(short)
	}
	if b == nil || b.Name() == "cpu" {
		return nil, "cpu", nil
	}
	return []fz.Option{fz.WithBackend(b)}, b.Name(), nil
}
