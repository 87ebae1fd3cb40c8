package miniotest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestChildNeedsMinIO is run by TestMissingBinary in a child process with
// no MinIO to be found.
func TestChildNeedsMinIO(t *testing.T) {
	if os.Getenv("FZ_MINIOTEST_CHILD") != "1" {
		t.Skip("helper of TestMissingBinary")
	}
	Start(t)
	t.Error("Start returned without a MinIO binary")
}

// Without MinIO the S3 tests skip, say how to install it and record the
// skip in $FZ_SKIP_LOG (which `make test` prints: `go test ./...` hides
// everything a passing package prints); FZ_REQUIRE_MINIO=1 makes them fail.
func TestMissingBinary(t *testing.T) {
	for _, c := range []struct {
		env  []string
		fail bool
		want string
	}{
		{nil, false, "bash .ci/install-minio.sh"},
		{[]string{"FZ_REQUIRE_MINIO=1"}, true, "NOT FOUND"},
	} {
		log := t.TempDir() + "/skips.log"
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildNeedsMinIO$", "-test.v")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "FZ_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "FZ_MINIOTEST_CHILD=1", "FZ_MINIO_BIN="+t.TempDir()+"/no-minio", "FZ_SKIP_LOG="+log)
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != c.fail || !strings.Contains(string(out), c.want) {
			t.Errorf("env %v: failed %v (want %v), output lacks %q:\n%s", c.env, failed, c.fail, c.want, out)
		}
		rec, _ := os.ReadFile(log)
		if logged := strings.Contains(string(rec), "TestChildNeedsMinIO: MinIO server binary NOT FOUND"); logged == c.fail {
			t.Errorf("env %v: skip log %q (a skip must be recorded, a failure not)", c.env, rec)
		}
	}
}
