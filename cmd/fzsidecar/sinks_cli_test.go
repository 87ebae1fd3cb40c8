package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/miniotest"
)

// cli runs the command in-process and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	fo, _ := os.Create(filepath.Join(dir, "stdout"))
	fe, _ := os.Create(filepath.Join(dir, "stderr"))
	so, se := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = fo, fe
	code = realMain(args)
	os.Stdout, os.Stderr = so, se
	fo.Close()
	fe.Close()
	o, _ := os.ReadFile(fo.Name())
	e, _ := os.ReadFile(fe.Name())
	return code, string(o), string(e)
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, args...)
	if code != 0 {
		t.Fatalf("fzsidecar %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

var testDims = []uint64{4, 24, 40}

func fieldF32(phase float64) []byte {
	n := testDims[0] * testDims[1] * testDims[2]
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(math.Cos(float64(i)*0.003+phase)*50)))
	}
	return b
}

// writeContainer compresses a field and writes it to dir/name.
func writeContainer(t *testing.T, dir, name string, raw []byte) string {
	t.Helper()
	blob, _, err := fz.Compress(context.Background(), raw, fz.Params{DType: fz.Float32, Dims: testDims, Mode: fz.Abs, Bound: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkClose(t *testing.T, what string, want, got []byte, bound float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := 0; i < len(want); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(want[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(got[i:]))
		if math.Abs(float64(a)-float64(b)) > bound {
			t.Fatalf("%s: value %d is %v, want %v within %v", what, i/4, b, a, bound)
		}
	}
}

// roundTrip drives put, ls, get and restore against one sink URL.
func roundTrip(t *testing.T, sink string) {
	in := t.TempDir()
	raws := map[string][]byte{}
	for step := range uint64(3) {
		for vi, v := range []string{"pres", "temp"} {
			raw := fieldF32(float64(step)*10 + float64(vi))
			raws[v+"/"+itoa(step)] = raw
			p := writeContainer(t, in, v+itoa(step)+".fz", raw)
			out := mustCLI(t, "put", "--sink", sink, "--run", "heat1", "--var", v, "--step", itoa(step), p)
			if !strings.Contains(out, "stored heat1/"+v) {
				t.Errorf("put said %q", out)
			}
		}
	}
	// Flags after the positional argument work too; a repeated put of the
	// same container is fine, another one under the same key is refused.
	p := filepath.Join(in, "temp1.fz")
	mustCLI(t, "put", p, "--sink", sink, "--run", "heat1", "--var", "temp", "--step", "1")
	code, _, errOut := cli(t, "put", "--sink", sink, "--run", "heat1", "--var", "temp", "--step", "2", p)
	if code != 1 || !strings.Contains(errOut, "different blob") {
		t.Errorf("conflicting put: exit %d, %s", code, errOut)
	}

	out := mustCLI(t, "ls", "--sink", sink)
	if !strings.Contains(out, "RUN") || !strings.Contains(out, "heat1") {
		t.Errorf("ls:\n%s", out)
	}
	out = mustCLI(t, "ls", "--sink", sink, "--run", "heat1")
	if !strings.Contains(out, "pres") || !strings.Contains(out, "temp") {
		t.Errorf("ls --run:\n%s", out)
	}
	out = mustCLI(t, "ls", "--sink", sink, "--run", "heat1", "--var", "temp", "--json")
	var rows []lsRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}
	if len(rows) != 3 || rows[2].Step != 2 || rows[0].DType != "f32" || rows[0].Ratio <= 1 ||
		rows[0].RawBytes != uint64(len(raws["temp/0"])) || rows[0].Bound != 0.05 || len(rows[0].CRC32C) != 8 {
		t.Errorf("ls --json rows: %+v", rows)
	}

	dir := t.TempDir()
	o := filepath.Join(dir, "temp.raw")
	mustCLI(t, "get", "--sink", sink, "--run", "heat1", "--var", "temp", "--step", "latest", "-o", o)
	got, _ := os.ReadFile(o)
	checkClose(t, "get latest", raws["temp/2"], got, 0.05)
	mustCLI(t, "get", "--sink", sink, "--run", "heat1", "--var", "pres", "--step", "1", "--backend", "cpu", "-o", o)
	got, _ = os.ReadFile(o)
	checkClose(t, "get step 1", raws["pres/1"], got, 0.05)
	// A region of the slowest dimension: only its chunks are fetched, and
	// it matches the same slice of the full field.
	mustCLI(t, "get", "--sink", sink, "--run", "heat1", "--var", "pres", "--step", "1", "--region", "1:3", "-o", o)
	got, _ = os.ReadFile(o)
	plane := 4 * testDims[1] * testDims[2]
	checkClose(t, "get --region 1:3", raws["pres/1"][plane:3*plane], got, 0.05)
	mustCLI(t, "get", "--sink", sink, "--run", "heat1", "--var", "pres", "--step", "1", "--compressed", "-o", o)
	got, _ = os.ReadFile(o)
	want, _ := os.ReadFile(filepath.Join(in, "pres1.fz"))
	if string(got) != string(want) {
		t.Error("get --compressed did not return the stored container")
	}

	to := filepath.Join(dir, "restart")
	mustCLI(t, "restore", "--sink", sink, "--run", "heat1", "--step", "latest", "--to", to)
	for _, v := range []string{"pres", "temp"} {
		got, err := os.ReadFile(filepath.Join(to, v+".raw"))
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, "restore "+v, raws[v+"/2"], got, 0.05)
	}
	if _, err := os.Stat(filepath.Join(to, "restore.json")); err != nil {
		t.Errorf("no manifest: %v", err)
	}

	// Unknown names: exit 1 and a list of what exists.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--run", "nope", "--var", "temp", "--step", "1", "-o", o}, `run "nope" not found`},
		{[]string{"get", "--run", "heat1", "--var", "vel", "--step", "1", "-o", o}, "existing variables: pres, temp"},
		{[]string{"get", "--run", "heat1", "--var", "temp", "--step", "7", "-o", o}, "existing steps: 0, 1, 2"},
		{[]string{"get", "--run", "nope", "--var", "temp", "--step", "latest", "-o", o}, "existing runs: heat1"},
		{[]string{"restore", "--run", "heat1", "--step", "9", "--to", to}, "existing steps: 0, 1, 2"},
		{[]string{"ls", "--run", "heat2"}, "existing runs: heat1"},
		{[]string{"ls", "--run", "heat1", "--var", "x"}, "existing variables: pres, temp"},
	} {
		code, _, errOut := cli(t, append(c.args, "--sink", sink)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", c.args, code, errOut, c.want)
		}
	}
}

func itoa(n uint64) string { return string(rune('0' + n)) }

func TestCLILocalRoundTrip(t *testing.T) {
	root := t.TempDir()
	roundTrip(t, "file://"+root)

	// A corrupt object: a checksum error naming the file.
	p := filepath.Join(root, "heat1", "temp", "000000000001.fz")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 4
	os.WriteFile(p, b, 0o644)
	code, _, errOut := cli(t, "get", "--sink", root, "--run", "heat1", "--var", "temp", "--step", "1", "-o", filepath.Join(t.TempDir(), "x"))
	if code != 1 || !strings.Contains(errOut, p) || !strings.Contains(errOut, "corrupt") {
		t.Errorf("get of a corrupt object: exit %d, %s", code, errOut)
	}
}

func TestCLIS3RoundTrip(t *testing.T) {
	srv := miniotest.Start(t)
	srv.SetEnv(t)
	roundTrip(t, "s3://"+srv.Bucket(t)+"/sims")
}

func TestCLIUsage(t *testing.T) {
	root := t.TempDir()
	notFz := filepath.Join(root, "x.fz")
	os.WriteFile(notFz, []byte("this is not a container at all, not even close to one..........................................."), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"put", "--help"}, 0, "Usage: fzsidecar put"},
		{[]string{"ls", "--help"}, 0, "--json"},
		{[]string{"get", "--help"}, 0, "--backend"},
		{[]string{"restore", "--help"}, 0, "--to"},
		{[]string{"put", "--run", "r", "--var", "v", "--step", "1", notFz}, 1, "not a valid container"},
		{[]string{"put", "--sink", root, "--run", "r", "--var", "v", "--step", "1"}, 2, "one input container"},
		{[]string{"put", "--sink", root, "--run", "r", "--var", "v", "--step", "latest", notFz}, 2, "latest makes no sense"},
		{[]string{"put", "--sink", root, "--run", "../x", "--var", "v", "--step", "1", notFz}, 2, "must start with a letter or digit"},
		{[]string{"put", "--sink", root, "--run", "r", "--var", "a/b", "--step", "1", notFz}, 2, `character '/'`},
		{[]string{"put", "--sink", root, "--run", "r", "--var", "v", "--step", "-3", notFz}, 2, "expected a number"},
		{[]string{"put", "--sink", root, "--run", "r", "--var", "v", "--step", "1", notFz}, 1, "not a valid container"},
		{[]string{"get", "--sink", root, "--run", "r", "--var", "v", "--step", "1"}, 2, "-o is required"},
		{[]string{"get", "--sink", root, "--run", "r", "--var", "v", "--step", "1", "--backend", "tpu", "-o", "x"}, 2, "expected auto, cpu or gpu"},
		{[]string{"restore", "--sink", root, "--run", "r", "--step", "1"}, 2, "--to is required"},
		{[]string{"ls", "--sink", root, "--var", "v"}, 2, "--var needs --run"},
		{[]string{"ls", "--sink", "ftp://x"}, 1, "unknown scheme"},
	} {
		code, out, errOut := cli(t, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d (want %d), output %q; want %q", c.args, code, c.code, out+errOut, c.want)
		}
	}
	if es, _ := os.ReadDir(root); len(es) != 1 {
		t.Errorf("failed commands wrote into the sink: %v", es)
	}
}
