package cuda

import (
	"fmt"
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
