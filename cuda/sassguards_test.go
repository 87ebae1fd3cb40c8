package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// TestSassGuards checks tools/sass_guards.py on small listings in
// nvdisasm -gi's and cuobjdump -sass's layouts: each kernel's instructions,
// divergence checks (BRA.DIV) and collective blocks; a check's guarded
// instruction is the first warp-wide one after it, placed at its source
// lines outside CUDA's headers; two listings compare kernel by kernel; a
// listing of two architectures keeps their kernels apart; a listing without
// kernels, and a pattern no kernel matches, are refused with
// a message.
func TestSassGuards(t *testing.T) {
	nativetest.Tools(t, "python3")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command("python3", append([]string{"tools/sass_guards.py"}, args...)...).CombinedOutput()
		return string(out), err
	}
	gi := write("b.sass", strings.Join([]string{
		"\t.target\tsm_90",
		"//--------------------- .text._Z4walkPi          --------------------------",
		"\t//## File \"/src/cuda/walk.cuh\", line 7",
		"        /*0000*/                   LDC R1, c[0x0][0x28] ;",
		"        /*0010*/                   UMOV UR4, 0xffffffff ;",
		"        /*0020*/                   BRA.DIV UR4, `(.L_x_9) ;",
		"\t//## File \"/src/cuda/walk.cuh\", line 12 inlined at \"/src/cuda/kernel.cu\", line 40",
		"        /*0030*/                   IMAD.MOV.U32 R2, RZ, RZ, R3 ;",
		"\t//## File \"/usr/local/cuda/include/sm_30_intrinsics.hpp\", line 409 inlined at \"/src/cuda/walk.cuh\", line 12",
		"\t//## File \"/src/cuda/walk.cuh\", line 12 inlined at \"/src/cuda/kernel.cu\", line 40",
		"\t//## File \"/src/cuda/kernel.cu\", line 40",
		"        /*0040*/                   SHFL.BFLY PT, R4, R2, 0x1, 0x1f ;",
		".L_x_9:",
		"        /*0050*/                   WARPSYNC.COLLECTIVE R5, `(.L_x_10) ;",
		"        /*0060*/                   SHFL.BFLY P0, R4, R2, R6, R7 ;",
		"        /*0070*/                   EXIT ;",
		"//--------------------- .text._Z4flatPi          --------------------------",
		"        /*0000*/                   EXIT ;",
		"",
	}, "\n"))
	out, err := run(gi, "--lines")
	if err != nil {
		t.Fatalf("sass_guards.py --lines: %v\n%s", err, out)
	}
	want := []string{
		"_Z4flatPi instructions 1 checks 0 collective 0",
		"_Z4walkPi instructions 8 checks 1 collective 1",
		"check at 0x0020 before SHFL.BFLY walk.cuh:12 < kernel.cu:40",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("sass_guards.py printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Fatalf("line %d: %q, want %q", i, got, w)
		}
	}
	// the same two kernels as cuobjdump lists them: walk without its check
	// and collective block, flat the same
	cu := write("a.sass", strings.Join([]string{
		"\tcode for sm_90",
		"\t\tFunction : _Z4walkPi",
		"        /*0000*/                   LDC R1, c[0x0][0x28] ;   /* 0x00000a00ff017b82 */",
		"                                                             /* 0x000fe40000000800 */",
		"        /*0010*/                   SHFL.BFLY PT, R4, R2, 0x1, 0x1f ;",
		"        /*0020*/                   EXIT ;",
		"\t\tFunction : _Z4flatPi",
		"        /*0000*/                   EXIT ;",
		"",
	}, "\n"))
	out, err = run(cu, gi)
	if err != nil {
		t.Fatalf("sass_guards.py A B: %v\n%s", err, out)
	}
	if got := strings.Join(strings.Fields(out), " "); got !=
		"_Z4walkPi instructions 3 -> 8 checks 0 -> 1 collective 0 -> 1 1 of 2 kernels the same" {
		t.Fatalf("sass_guards.py A B printed %q", out)
	}
	// a fat library lists each kernel once per architecture: two kernels,
	// named with their architectures, not one of both codes' instructions
	fat := write("fat.sass", strings.Join([]string{
		"\tcode for sm_80",
		"\t\tFunction : _Z4walkPi",
		"        /*0000*/                   EXIT ;",
		"\tcode for sm_90",
		"\t\tFunction : _Z4walkPi",
		"        /*0000*/                   LDC R1, c[0x0][0x28] ;",
		"        /*0010*/                   EXIT ;",
		"",
	}, "\n"))
	if out, err = run(fat); err != nil || strings.Join(strings.Fields(out), " ") !=
		"_Z4walkPi (sm_80) instructions 1 checks 0 collective 0 _Z4walkPi (sm_90) instructions 2 checks 0 collective 0" {
		t.Fatalf("sass_guards.py on two architectures: err %v, output %q", err, out)
	}
	if out, err = run(gi, "--kernel", "nosuch"); err == nil || !strings.Contains(out, "no kernel matches nosuch") {
		t.Fatalf("a pattern no kernel matches: err %v, output %q; expected a refusal naming it", err, out)
	}
	empty := write("empty.txt", "not a listing\n")
	if out, err = run(empty); err == nil || !strings.Contains(out, "lists no kernel") {
		t.Fatalf("a file without kernels: err %v, output %q; expected a refusal", err, out)
	}
}
