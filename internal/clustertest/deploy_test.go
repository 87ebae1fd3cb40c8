package clustertest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
	"go.yaml.in/yaml/v3"
)

// The deployment examples of docs/DEPLOY.md stay valid: the Kubernetes
// manifests parse, every FZ_ variable they set is a setting serve knows, the
// Slurm script passes bash -n, and the NATS server configuration passes
// nats-server -t.
func TestDeployExamples(t *testing.T) {
	root := nativetest.RepoRoot(t)
	known := map[string]bool{}
	for _, k := range config.Keys() {
		known[k[1]] = true
	}

	manifests, _ := filepath.Glob(filepath.Join(root, "deploy", "k8s", "*.yaml"))
	if len(manifests) == 0 {
		t.Fatal("no manifests in deploy/k8s")
	}
	for _, f := range manifests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		kinds := 0
		for {
			var doc struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
				Spec       struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Name string `yaml:"name"`
								Env  []struct {
									Name string `yaml:"name"`
								} `yaml:"env"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc.APIVersion == "" || doc.Kind == "" {
				t.Errorf("%s: a document without apiVersion or kind", f)
			}
			kinds++
			for _, c := range doc.Spec.Template.Spec.Containers {
				if c.Name != "fzsidecar" {
					continue // the application's FZ_ variables are its own
				}
				for _, e := range c.Env {
					if strings.HasPrefix(e.Name, "FZ_") && !known[e.Name] {
						t.Errorf("%s: container %s sets %s, which is no setting of fzsidecar serve", f, c.Name, e.Name)
					}
				}
			}
		}
		if kinds == 0 {
			t.Errorf("%s: no documents", f)
		}
	}

	scripts, _ := filepath.Glob(filepath.Join(root, "deploy", "slurm", "*.sh"))
	if len(scripts) == 0 {
		t.Fatal("no scripts in deploy/slurm")
	}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}

	// Last: without nats-server this part skips (the checks above ran).
	t.Run("nats-server.conf", func(t *testing.T) {
		conf := filepath.Join(root, "deploy", "nats", "nats-server.conf")
		bin := natsServerBinary(t)
		cmd := exec.Command(bin, "-c", conf, "-t")
		cmd.Env = append(os.Environ(), "NATS_SERVER_NAME=nats-0", "NATS_ROUTE_PASSWORD=r", "ALICE_SIDECAR_PASSWORD=s",
			"ALICE_PRODUCER_PASSWORD=p")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("nats-server -t %s: %v\n%s", conf, err, out)
		}
	})
}
