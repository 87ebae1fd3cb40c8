package main

import (
	"fmt"

	"github.com/fzsidecar/fzsidecar/fz"
)

// selectBackend resolves --backend to codec options and a name for
// reports. Only the CPU backend exists in this build.
func selectBackend(name string) ([]fz.Option, string, error) {
	switch name {
	case "", "auto", "cpu":
		return nil, "cpu", nil
	case "gpu":
		return nil, "", fmt.Errorf("--backend gpu: this build has no GPU backend yet (use --backend cpu or auto)")
	}
	return nil, "", fmt.Errorf("--backend %q: expected auto, cpu or gpu", name)
}
