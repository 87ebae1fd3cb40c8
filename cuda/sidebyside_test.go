package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// TestReadmeSideBySideTable checks that the README's side-by-side table with
// the peers (#30) is what tools/sidebyside.py makes of the bench JSON and
// peers file in bench/ (the one call the table cites; bench/ holds one JSON,
// the latest round's, with the earlier runs the docs still cite): a table
// edited by hand, or data replaced without the table, fails here. It also
// checks that the script refuses a run the JSON lacks, saying which runs it
// has.
func TestReadmeSideBySideTable(t *testing.T) {
	nativetest.Tools(t, "python3")
	peers, _ := filepath.Glob("bench/h200-v*-peers.txt")
	if len(peers) != 1 {
		t.Fatalf("bench/ holds %d peers files (%v), expected the latest call's only", len(peers), peers)
	}
	jsons, _ := filepath.Glob("bench/h200-v*.json")
	if len(jsons) != 1 {
		t.Fatalf("bench/ holds %d bench JSON files (%v), expected the latest round's only (earlier rounds' are in git)", len(jsons), jsons)
	}
	runs := jsons[0]
	out, err := exec.Command("python3", "tools/sidebyside.py", peers[0], runs).CombinedOutput()
	if err != nil {
		t.Fatalf("sidebyside.py %s %s: %v\n%s", peers[0], runs, err, out)
	}
	want := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(want) != 24 {
		t.Fatalf("sidebyside.py printed %d rows, expected 24 (8 row kinds x 3 bounds):\n%s", len(want), out)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "| field | REL | ours | cuSZp plain | cuSZp outlier | FZ-GPU | compress ÷ | decompress ÷ | ratio ÷ |"
	_, rest, ok := strings.Cut(string(readme), head+"\n")
	if !ok {
		t.Fatalf("README.md has no side-by-side table (header %q)", head)
	}
	var got []string
	for _, line := range strings.Split(rest, "\n")[1:] { // after the |---| line
		if !strings.HasPrefix(line, "|") {
			break
		}
		got = append(got, line)
	}
	if len(got) != len(want) {
		t.Fatalf("README's table has %d rows, %s and %s make %d", len(got), runs, peers[0], len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("README row %d:\n  %s\n%s and %s make:\n  %s", i+1, got[i], runs, peers[0], want[i])
		}
	}
	bad, err := exec.Command("python3", "tools/sidebyside.py", peers[0], runs, "--run", "v2=no-such-run").CombinedOutput()
	if err == nil || !strings.Contains(string(bad), "no run 'no-such-run'") {
		t.Fatalf("sidebyside.py with a missing run: err %v, output %q; expected a refusal naming the run", err, bad)
	}
}
