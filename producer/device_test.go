package producer_test

// GPU-resident snapshots (fzp_publish_device, Producer.put_device): on any
// machine, a device publish is refused with a clear code (no CUDA driver:
// "system"; a sidecar without the cuda_ipc feature: "device_unsupported");
// on a GPU machine with nvcc, the CUDA C stencil publishes device buffers
// to `fzsidecar serve --backend gpu` and every step is checked like the
// other mini-apps (producer/examples/cuda/run_device.sh does the same, and
// more, where Go is not installed).

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
)

func TestDevicePublishRefused(t *testing.T) {
	dir := build(t)
	py := nativetest.PythonModules(t, "numpy")
	root := nativetest.RepoRoot(t)
	sc := nativetest.Serve(t) // CPU backend: no cuda_ipc feature
	script := `
import sys
from fzsidecar.producer import Producer, ProducerError

class Dev:  # what CuPy/PyTorch expose; the pointer is host memory here
    def __init__(self, typestr="<f4", strides=None):
        import numpy as np
        self.host = np.zeros((8, 16), np.float32)
        self.__cuda_array_interface__ = {"shape": (8, 16), "typestr": typestr, "strides": strides,
                                         "data": (self.host.ctypes.data, False), "version": 3}

with Producer(sys.argv[1], shm_dir=sys.argv[2], connect_timeout=10) as p:
    for bad, what in ((Dev("<i2"), "float32"), (Dev(strides=(4, 32)), "C-contiguous")):
        try:
            p.put("r", "v", 1, bad)
            print("ACCEPTED", what)
        except ValueError as e:
            assert what in str(e), e
    try:
        p.put("r", "v", 1, Dev())
        print("ACCEPTED device publish")
    except ProducerError as e:
        print("CODE", e.code, "|", e)
`
	out, rc := run(t, 2*time.Minute, []string{"PYTHONPATH=" + filepath.Join(root, "python"), "PYTHONDONTWRITEBYTECODE=1",
		"FZ_LIBFZPRODUCER=" + filepath.Join(dir, "libfzproducer.so")}, py, "-c", script, sc.URL, sc.ShmDir)
	t.Logf("%s", out)
	if rc != 0 || strings.Contains(out, "ACCEPTED") {
		t.Fatalf("exit %d", rc)
	}
	switch {
	case strings.Contains(out, "CODE system") && strings.Contains(out, "libcuda.so.1"):
		// no CUDA driver on this machine
	case strings.Contains(out, "CODE system") && strings.Contains(out, "cuInit"):
		// a driver library but no GPU (cuInit: CUDA error 100, no CUDA-capable device)
	case strings.Contains(out, "CODE device_unsupported") && strings.Contains(out, "cuda_ipc"):
		// a driver, but the sidecar compresses on the CPU
	default:
		t.Fatalf("want code system (no driver, or no GPU) or device_unsupported (CPU sidecar)")
	}
}

func TestDeviceStencilGPU(t *testing.T) {
	// A GPU is never required (CI has none): skip, also under
	// FZ_REQUIRE_NATIVE, with what is missing.
	if _, err := exec.LookPath("nvcc"); err != nil {
		skiplog.Skipf(t, "SKIP: GPU test: no nvcc (CUDA toolkit) on PATH")
	}
	root := nativetest.RepoRoot(t)
	lib := filepath.Join(root, "cuda", "build", cuda.LibName)
	if _, err := os.Stat(lib); err != nil {
		skiplog.Skipf(t, "SKIP: GPU test: no %s (make -C cuda)", lib)
	}
	t.Setenv("FZ_CUDA_LIB", lib)
	if ok, why := cuda.Available(); !ok {
		skiplog.Skipf(t, "SKIP: GPU test: no usable GPU: %v", why)
	}
	dir := build(t)
	bin := filepath.Join(t.TempDir(), "stencil")
	cmd := exec.Command("nvcc", "-O2", "-I"+filepath.Join(root, "producer", "include"),
		filepath.Join(root, "producer", "examples", "cuda", "stencil.cu"), "-L"+dir, "-lfzproducer",
		"-Xlinker", "-rpath="+dir, "-o", bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nvcc: %v\n%s", err, out)
	}
	sc := nativetest.Serve(t, "--backend", "gpu")
	dump := t.TempDir()
	out, rc := run(t, 3*time.Minute, []string{"FZ_TEST_SHM_DIR=" + sc.ShmDir}, bin, "--nx", "1024", "--ny", "768",
		"--steps", "60", "--every", "20", "--shm-dir", sc.ShmDir, "--url", sc.URL, "--dump", dump)
	t.Logf("%s", out)
	if rc != 0 {
		t.Fatalf("stencil: exit %d", rc)
	}
	// checkRun compares each decoded step with the dump within the bound
	// (rel 1e-3 of the step's range: the stored abs bound, per step)
	for _, r := range listSteps(t, sc, "stencil", "temperature") {
		if r.MaxAbsErr > r.AbsEB {
			t.Errorf("step %d: max error %g over bound %g", r.Step, r.MaxAbsErr, r.AbsEB)
		}
	}
	rows := listSteps(t, sc, "stencil", "temperature")
	if len(rows) != 3 {
		t.Fatalf("%d steps stored, want 3", len(rows))
	}
	// stored bytes == the CPU codec's bytes of the same field
	for _, r := range rows {
		raw := filepath.Join(dump, "step-"+strconv.FormatUint(r.Step, 10)+".raw")
		stored, cpu := raw+".stored.fz", raw+".cpu.fz"
		if _, e, rc := sc.CLI(t, "get", "--sink", sc.Sink, "--run", "stencil", "--var", "temperature", "--step",
			strconv.FormatUint(r.Step, 10), "--compressed", "-o", stored); rc != 0 {
			t.Fatalf("get: %s", e)
		}
		if _, e, rc := sc.CLI(t, "compress", "--backend", "cpu", "--dtype", "f32", "--dims", "768x1024", "--mode", "rel",
			"--eb", "1e-3", "-o", cpu, raw); rc != 0 {
			t.Fatalf("compress: %s", e)
		}
		a, _ := os.ReadFile(stored)
		b, _ := os.ReadFile(cpu)
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("step %d: stored container (%d bytes) differs from the CPU codec's (%d bytes)", r.Step, len(a), len(b))
		}
	}
}
