// Package hdf5_test drives the FZ HDF5 filter plugin (h5z_fz.c) as users
// meet it: it builds libfz.so and the plugin, then runs hdf5/tests with
// h5py, h5dump and netCDF4-python against them (see docs/FORMATS.md).
package hdf5_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// buildPlugin builds libfz.so into dir/lib and the plugin into
// dir/hdf5-plugins (the layout of `make hdf5`: the plugin finds libfz in
// ../lib) and returns the plugin directory.
func buildPlugin(t *testing.T, root, dir string) string {
	t.Helper()
	steps := [][]string{
		{"go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "lib", "libfz.so"), "./libfz"},
		{"make", "-s", "-C", "hdf5", "BUILD=" + dir},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	return filepath.Join(dir, "hdf5-plugins")
}

func TestHDF5Filter(t *testing.T) {
	nativetest.Tools(t, "cc", "make", "pkg-config", "h5dump", "h5repack")
	nativetest.PkgConfig(t, "hdf5")
	py := nativetest.PythonModules(t, "numpy", "h5py", "netCDF4", "pytest")
	root := nativetest.RepoRoot(t)
	build := t.TempDir()
	plugins := buildPlugin(t, root, build)
	cli := nativetest.BuildFzsidecar(t)

	cmd := exec.Command(py, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rs", filepath.Join(root, "hdf5", "tests"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		"HDF5_PLUGIN_PATH="+plugins,
		"FZSIDECAR_BIN="+cli,
		"FZ_LIBFZ="+filepath.Join(build, "lib", "libfz.so"),
		"FZ_SHARED_DATA="+filepath.Join(root, "..", "shared", "data"),
		"PYTHONPATH="+filepath.Join(root, "python"),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("pytest hdf5/tests:\n%s", out)
	if err != nil {
		t.Fatalf("pytest hdf5/tests failed: %v", err)
	}
}

// TestCExample builds hdf5/examples/h5z_fz_example.c against the installed
// header (build/include/h5z_fz.h) and runs it with nothing but
// HDF5_PLUGIN_PATH: a MANDATORY filter round trip within the bound, and a
// bad bound refused at dataset creation.
func TestCExample(t *testing.T) {
	nativetest.Tools(t, "cc", "make", "pkg-config")
	nativetest.PkgConfig(t, "hdf5")
	root := nativetest.RepoRoot(t)
	build := t.TempDir()
	plugins := buildPlugin(t, root, build)
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "hdf5").Output()
	if err != nil {
		t.Fatalf("pkg-config --cflags --libs hdf5: %v", err)
	}
	exe := filepath.Join(build, "h5z_fz_example")
	args := append([]string{"-O2", "-Wall", "-Werror", "-I" + filepath.Join(build, "include"), "-o", exe,
		filepath.Join(root, "hdf5", "examples", "h5z_fz_example.c")}, strings.Fields(string(flags))...)
	if out, err := exec.Command("cc", append(args, "-lm")...).CombinedOutput(); err != nil {
		t.Fatalf("cc h5z_fz_example.c: %v\n%s", err, out)
	}
	cmd := exec.Command(exe, filepath.Join(t.TempDir(), "example.h5"))
	cmd.Env = []string{"HDF5_PLUGIN_PATH=" + plugins, "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	t.Logf("h5z_fz_example:\n%s", out)
	if err != nil {
		t.Fatalf("h5z_fz_example failed: %v", err)
	}
	if !strings.Contains(string(out), "ratio") || !strings.Contains(string(out), "refused") {
		t.Fatalf("h5z_fz_example printed no ratio or no refusal:\n%s", out)
	}
}
