package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// buildEmu builds one of tools/*_emu.cpp, the host emulations of the
// device code (C++20, AddressSanitizer and UBSan, aborting at the first
// report, with extra flags), into a temporary directory and returns the
// binary's path. Without g++ the test skips (or fails where
// FZ_REQUIRE_NATIVE=1, as in CI).
func buildEmu(t *testing.T, src string, extra ...string) string {
	t.Helper()
	nativetest.Tools(t, "g++")
	emu := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".cpp"))
	args := append([]string{"-std=c++20", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"}, extra...)
	build := exec.Command("g++", append(args, "-o", emu, src)...)
	build.Dir = "tools"
	if out, err := build.CombinedOutput(); err != nil {
		nativetest.Need(t, false, fmt.Sprintf("g++ with AddressSanitizer could not build tools/%s: %v\n%s", src, err, out))
	}
	return emu
}

// runEmu runs an emulation built by buildEmu on input in (given as a file
// path, as is its output) and returns what it wrote.
func runEmu(t *testing.T, emu string, in []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	inPath, outPath := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(inPath, in, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(emu, inPath, outPath).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(emu), err, out)
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
