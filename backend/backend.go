// Package backend picks the codec backend for the command line.
package backend

import (
	"fmt"
	"strings"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
)

// Names are the accepted values of --backend.
const Names = "auto, cpu or gpu"

// Select returns the backend for name (auto, cpu, gpu) and a one-line
// description of the choice for the user. "auto" takes the GPU when the
// library and a device are present and says why not otherwise; "gpu"
// without them is an error.
func Select(name string) (fz.Backend, string, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "auto":
		b, err := cuda.Open()
		if err != nil {
			return fz.CPU(), fmt.Sprintf("backend auto: cpu (GPU unavailable: %v)", err), nil
		}
		return b, "backend auto: " + b.Name(), nil
	case "cpu":
		return fz.CPU(), "backend cpu", nil
	case "gpu":
		b, err := cuda.Open()
		if err != nil {
			return nil, "", fmt.Errorf("--backend gpu: %w", err)
		}
		return b, "backend gpu: " + b.Name(), nil
	}
	return nil, "", fmt.Errorf("unknown backend %q: expected %s", name, Names)
}
