package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// TestNcuSourceCountsAddressesOnce checks tools/ncu_source.py on a small
// export in ncu's layout: an instruction listed under two lines (inlined
// from a callee) counts once in the kernel's totals and in each line's
// inclusive figure; an export without its header or counters is refused
// with a message that says what is missing.
func TestNcuSourceCountsAddressesOnce(t *testing.T) {
	nativetest.Tools(t, "python3")
	dir := t.TempDir()
	hdr := `"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed","Thread Instructions Executed"`
	export := strings.Join([]string{
		`"File Path","/src/cuda/walk.cuh"`,
		`"Function Name","void walk_kernel<float, (int)2, (bool)0>(Geo, const unsigned char *)"`,
		hdr,
		`"10","int d = resid(c);","-","-","5","0","0","0","0"`,
		`"","","0x10","      ISETP.GE.U32.AND P0, PT, R2, 0x8000, PT","3","0","0","100","3200"`,
		`"","","0x20","      IADD3 R3, -R2, 0x8000, RZ","2","0","0","100","3200"`,
		`"11","out[y] = v;","-","-","1","0","0","0","0"`,
		`"","","0x30","      STG.E [R4.64], R3","1","0","0","50","1600"`,
		`"File Path","/src/cuda/resid.cuh"`,
		`"Function Name","void walk_kernel<float, (int)2, (bool)0>(Geo, const unsigned char *)"`,
		hdr,
		`"3","return c >= 0x8000u ? 0x8000 - c : c;","-","-","2","0","0","0","0"`,
		`"","","0x20","      IADD3 R3, -R2, 0x8000, RZ","2","0","0","100","3200"`,
	}, "\n") + "\n"
	csvPath := filepath.Join(dir, "src.csv")
	if err := os.WriteFile(csvPath, []byte(export), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", "tools/ncu_source.py", csvPath, "--tiles", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("ncu_source.py: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"kernel void walk_kernel<float, 2, 0>",
		// 0x20 is listed under both files: counted once (250 = 100 + 100 + 50)
		"warp-instructions 250, 125 a tile of 2; thread-instructions 8,000; stall samples 6",
		" 80.0 %  83.3 % samples  walk.cuh:10  int d = resid(c);",
		" 40.0 %  33.3 % samples  resid.cuh:3  return c >= 0x8000u",
		" 20.0 %  16.7 % samples  walk.cuh:11  out[y] = v;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(`"File Path","/x.cuh"`+"\n"+`"Line No","Source","Address"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("python3", "tools/ncu_source.py", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "has no column") || !strings.Contains(string(out), "SourceCounters") {
		t.Errorf("an export without the counters' columns: err %v, output %q; want a refusal naming --section SourceCounters", err, out)
	}
}
