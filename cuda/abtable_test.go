package cuda

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// TestABTable checks tools/ab_table.py (device_verify.sh ab's table) on
// bench JSON made here: each side's better of its two medians, its ratio to
// A, the violations of every run summed; runs whose cases differ from A's,
// and a missing run, are refused with a message naming the run.
func TestABTable(t *testing.T) {
	nativetest.Tools(t, "python3")
	dir := t.TempDir()
	type bcase struct {
		Field      string  `json:"field"`
		Rel        float64 `json:"rel"`
		Comp       float64 `json:"compress_bytes_per_s"`
		Dec        float64 `json:"decompress_bytes_per_s"`
		Violations int     `json:"bound_violations"`
	}
	write := func(name string, cases ...bcase) {
		b, err := json.Marshal(map[string]any{"cases": cases})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// compress / decompress GB/s of runs 1 and 2 per side
	write("ab-a1.json", bcase{"f", 0.01, 100e9, 200e9, 0})
	write("ab-a2.json", bcase{"f", 0.01, 110e9, 190e9, 0})
	write("ab-b1.json", bcase{"f", 0.01, 120e9, 150e9, 1})
	write("ab-b2.json", bcase{"f", 0.01, 99e9, 160e9, 0})
	out, err := exec.Command("python3", "tools/ab_table.py", dir, "ab", "a", "b").CombinedOutput()
	if err != nil {
		t.Fatalf("ab_table.py: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("ab_table.py printed %d lines, want a header and one case:\n%s", len(lines), out)
	}
	// A: 110 / 200, B: 120 / 160 -> 1.09 and 0.80; violations 1
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != "f 0.01 110.0 120.0 1.09 200.0 160.0 0.80 1" {
		t.Fatalf("ab_table.py's line: %q", lines[1])
	}
	write("ab-b2.json", bcase{"g", 0.01, 99e9, 160e9, 0})
	if bad, err := exec.Command("python3", "tools/ab_table.py", dir, "ab", "a", "b").CombinedOutput(); err == nil ||
		!strings.Contains(string(bad), "run b2 has other cases") {
		t.Fatalf("ab_table.py with a run of other cases: err %v, output %q; expected a refusal naming b2", err, bad)
	}
	if bad, err := exec.Command("python3", "tools/ab_table.py", dir, "ab", "a", "c").CombinedOutput(); err == nil ||
		!strings.Contains(string(bad), "ab-c1.json") {
		t.Fatalf("ab_table.py with a missing run: err %v, output %q; expected a refusal naming ab-c1.json", err, bad)
	}
}
