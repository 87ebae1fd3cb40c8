package ingest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Two producers of one process given no id got the same <host>-<pid> (QA):
// they then share result subjects and segment-name prefixes. Each default
// is unique in the process; the first stays <host>-<pid>.
func TestDefaultProducerIDsUnique(t *testing.T) {
	url, shm := startLeaseSidecar(t, 1<<20, 0)
	a := leaseProducer(t, url, shm, "")
	b := leaseProducer(t, url, shm, "")
	pid := fmt.Sprintf("-%d", os.Getpid())
	if a.ID() == b.ID() {
		t.Fatalf("two producers without an id both got %q: expected distinct ids", a.ID())
	}
	for _, id := range []string{a.ID(), b.ID()} {
		if !ValidToken(id) || !strings.Contains(id, pid) {
			t.Errorf("default id %q: expected a valid token with <host>%s", id, pid)
		}
	}
	if c := DefaultProducerID(); c == a.ID() || c == b.ID() {
		t.Errorf("third default id %q repeats one", c)
	}
}
