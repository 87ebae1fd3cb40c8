package backend

import (
	"strings"
	"testing"
)

func TestSelect(t *testing.T) {
	b, msg, err := Select("cpu")
	if err != nil || b.Name() != "cpu" || msg == "" {
		t.Fatalf("cpu: %v %q %v", b, msg, err)
	}
	if _, _, err := Select("tpu"); err == nil || !strings.Contains(err.Error(), "auto, cpu or gpu") {
		t.Fatalf("unknown name: %v", err)
	}
	b, msg, err = Select("auto")
	if err != nil {
		t.Fatalf("auto must never fail: %v", err)
	}
	if !strings.Contains(msg, b.Name()) {
		t.Fatalf("auto message %q does not name the backend %q", msg, b.Name())
	}
	// gpu either works or fails with a message naming the reason.
	if g, _, err := Select("gpu"); err != nil {
		if !strings.Contains(err.Error(), "--backend gpu") {
			t.Fatalf("gpu error lacks context: %v", err)
		}
		if b.Name() != "cpu" {
			t.Fatalf("auto chose %q although gpu fails", b.Name())
		}
	} else if !strings.HasPrefix(g.Name(), "gpu") {
		t.Fatalf("gpu backend named %q", g.Name())
	}
}
