// Package producer_test drives libfzproducer's real programs against real
// `fzsidecar serve` processes: it builds the C library, its tests and
// examples with CMake, runs ctest, the C and Fortran heat-equation
// mini-apps (the C one while the sidecar is SIGKILLed and restarted), the
// Fortran array-order check and the Python binding's tests and example, and
// checks with `fzsidecar ls` / `get` that every step is stored once and
// within its bound. Without cmake, a C compiler or libnats the tests skip
// (fail under FZ_REQUIRE_NATIVE=1).
package producer_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
	"github.com/nats-io/nats-server/v2/server"
)

var (
	buildOnce  sync.Once
	buildDir   string
	buildErr   error
	hasFortran bool
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// build configures and builds producer/ once per test binary and returns
// the build directory.
func build(t testing.TB) string {
	t.Helper()
	nativetest.Tools(t, "cmake")
	nativetest.PkgConfig(t, "libnats")
	_, ccErr := exec.LookPath("cc")
	nativetest.Need(t, ccErr == nil, "no C compiler (cc) on PATH")
	root := nativetest.RepoRoot(t)
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "fzproducer-build-")
		if buildErr != nil {
			return
		}
		_, err := exec.LookPath("gfortran")
		hasFortran = err == nil
		fortran := "OFF"
		if hasFortran {
			fortran = "ON"
		}
		for _, args := range [][]string{
			{"-S", filepath.Join(root, "producer"), "-B", buildDir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DFZP_FORTRAN=" + fortran},
			{"--build", buildDir, "-j", strconv.Itoa(runtime.NumCPU())},
		} {
			if out, err := exec.Command("cmake", args...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("cmake %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// run runs a program with extra environment and a time limit; it returns
// combined output and the exit code.
func run(t testing.TB, limit time.Duration, env []string, prog string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v: still running after %v (a hang)\n%s", prog, args, limit, out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// bareNATS is a NATS server without a sidecar behind it.
func bareNATS(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

func TestCtest(t *testing.T) {
	dir := build(t)
	sc := nativetest.Serve(t)
	small := nativetest.Serve(t, "--budget", "1MiB")
	lease := nativetest.Serve(t, "--budget", "1MiB", "--lease-ttl", "2s") // test_lease
	env := []string{"FZ_TEST_URL=" + sc.URL, "FZ_TEST_SHM_DIR=" + sc.ShmDir,
		"FZ_TEST_SMALL_URL=" + small.URL, "FZ_TEST_SMALL_SHM_DIR=" + small.ShmDir, "FZ_TEST_BARE_URL=" + bareNATS(t),
		"FZ_TEST_LEASE_URL=" + lease.URL, "FZ_TEST_LEASE_SHM_DIR=" + lease.ShmDir}
	out, rc := run(t, 8*time.Minute, env, "ctest", "--test-dir", dir, "--output-on-failure", "--timeout", "300")
	t.Logf("ctest:\n%s", out)
	if rc != 0 {
		t.Fatalf("ctest failed (exit %d)", rc)
	}
	if strings.Contains(out, "Skipped") || strings.Contains(out, "Not Run") || !strings.Contains(out, "100% tests passed") {
		t.Fatalf("ctest skipped or did not run tests that must run here")
	}
}

// lsRow is one step of `fzsidecar ls --json`.
type lsRow struct {
	Run, Var  string
	Step      uint64
	DType     string
	Dims      []uint64
	AbsEB     float64 `json:"abs_eb"`
	MaxAbsErr float64 `json:"max_abs_err"`
}

func listSteps(t *testing.T, sc *nativetest.Sidecar, runName, varName string) []lsRow {
	t.Helper()
	stdout, stderr, rc := sc.CLI(t, "ls", "--sink", sc.Sink, "--run", runName, "--var", varName, "--json")
	if rc != 0 {
		t.Fatalf("fzsidecar ls: exit %d\n%s", rc, stderr)
	}
	var rows []lsRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, stdout)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Step < rows[j].Step })
	return rows
}

// getValues decodes one stored step with `fzsidecar get`.
func getValues(t *testing.T, sc *nativetest.Sidecar, runName, varName string, step uint64, dtype string) []float64 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "got.raw")
	if _, stderr, rc := sc.CLI(t, "get", "--sink", sc.Sink, "--run", runName, "--var", varName,
		"--step", strconv.FormatUint(step, 10), "--backend", "cpu", "-o", out); rc != 0 {
		t.Fatalf("fzsidecar get %s/%s/%d: exit %d\n%s", runName, varName, step, rc, stderr)
	}
	return readRaw(t, out, dtype)
}

func readRaw(t *testing.T, path, dtype string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := 4
	if dtype == "f64" {
		size = 8
	}
	if len(b)%size != 0 {
		t.Fatalf("%s: %d bytes is not a whole number of %s", path, len(b), dtype)
	}
	v := make([]float64, len(b)/size)
	for i := range v {
		if size == 4 {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		} else {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return v
}

var storedRE = regexp.MustCompile(`(?m)^stored step (\d+) `)

// checkRun verifies a mini-app's run: its output reports each step stored
// exactly once and nothing failed, the sink holds exactly those steps with
// the expected dtype and dims, and each decoded field is within bound of
// what the program published (its dump).
func checkRun(t *testing.T, sc *nativetest.Sidecar, out, runName, varName, dtype string, dims []uint64, bound float64,
	steps []uint64, dump string) {
	t.Helper()
	if strings.Contains(out, "FAILED") {
		t.Fatalf("the program reported failures:\n%s", out)
	}
	seen := map[uint64]int{}
	for _, m := range storedRE.FindAllStringSubmatch(out, -1) {
		s, _ := strconv.ParseUint(m[1], 10, 64)
		seen[s]++
	}
	for _, s := range steps {
		if seen[s] != 1 {
			t.Errorf("step %d reported stored %d times, want once", s, seen[s])
		}
	}
	if len(seen) != len(steps) {
		t.Errorf("%d distinct steps reported stored, want %d", len(seen), len(steps))
	}
	rows := listSteps(t, sc, runName, varName)
	if len(rows) != len(steps) {
		t.Fatalf("sink holds %d steps of %s/%s, want %d: %+v", len(rows), runName, varName, len(steps), rows)
	}
	for i, r := range rows {
		if r.Step != steps[i] || r.DType != dtype || fmt.Sprint(r.Dims) != fmt.Sprint(dims) {
			t.Fatalf("stored %d %s %v, want step %d %s %v", r.Step, r.DType, r.Dims, steps[i], dtype, dims)
		}
		if r.MaxAbsErr > r.AbsEB || r.AbsEB != bound {
			t.Errorf("step %d: max error %g, abs bound %g (want %g)", r.Step, r.MaxAbsErr, r.AbsEB, bound)
		}
		got := getValues(t, sc, runName, varName, r.Step, dtype)
		want := readRaw(t, filepath.Join(dump, fmt.Sprintf("step-%d.raw", r.Step)), dtype)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d values decoded, %d published", r.Step, len(got), len(want))
		}
		worst := 0.0
		for k := range got {
			worst = math.Max(worst, math.Abs(got[k]-want[k]))
		}
		// The bound holds for the values in their dtype; allow float32 rounding of the comparison itself.
		if worst > bound*(1+1e-6) {
			t.Errorf("step %d: max |decoded - published| = %g > bound %g", r.Step, worst, bound)
		}
	}
}

func everyStep(every, last uint64) []uint64 {
	var s []uint64
	for k := every; k <= last; k += every {
		s = append(s, k)
	}
	return s
}

// TestHeatCSidecarKilled runs the C mini-app and SIGKILLs the sidecar (and
// its embedded NATS server) right after a snapshot is published, then
// restarts it: every step must still be stored exactly once.
func TestHeatCSidecarKilled(t *testing.T) {
	dir := build(t)
	sc := nativetest.Serve(t)
	dump := t.TempDir()
	cmd := exec.Command(filepath.Join(dir, "heat2d"), "--url", sc.URL, "--shm-dir", sc.ShmDir, "--id", "heat-c",
		"--run", "heat-c", "--nx", "512", "--ny", "384", "--steps", "300", "--every", "10", "--sleep-ms", "3",
		"--dump", dump)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	published := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if line == "published step 100" {
				published <- struct{}{}
			}
		}
	}()
	select {
	case <-published:
		sc.Kill()
		// Informational: whether the kill caught step 100 in flight (it
		// usually does: the line arrives before the sidecar has stored it).
		inFlight := !strings.Contains(sc.Stderr(), "step=100 ")
		sc.Start(t)
		t.Logf("sidecar killed (SIGKILL) after step 100 was published (still in flight in the sidecar: %v), and restarted", inFlight)
	case <-done:
		t.Fatalf("heat2d ended before step 100:\n%s", out.String())
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("heat2d did not publish step 100 within 3 minutes")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("heat2d still running 5 minutes after the restart:\n%s", out.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("heat2d: %v\n%s", err, out.String())
	}
	checkRun(t, sc, out.String(), "heat-c", "temperature", "f32", []uint64{384, 512}, 1e-3, everyStep(10, 300), dump)
}

// TestHeatCF64 runs the C mini-app in double precision, where output steps
// are computed straight into the segment, with segment reuse and every step
// published.
func TestHeatCF64(t *testing.T) {
	dir := build(t)
	sc := nativetest.Serve(t)
	dump := t.TempDir()
	out, rc := run(t, 5*time.Minute, nil, filepath.Join(dir, "heat2d"), "--url", sc.URL, "--shm-dir", sc.ShmDir,
		"--run", "heat-c64", "--nx", "96", "--ny", "64", "--steps", "12", "--every", "1", "--dtype", "f64",
		"--bound", "1e-6", "--reuse", "3", "--dump", dump)
	if rc != 0 {
		t.Fatalf("heat2d: exit %d\n%s", rc, out)
	}
	checkRun(t, sc, out, "heat-c64", "temperature", "f64", []uint64{64, 96}, 1e-6, everyStep(1, 12), dump)
}

func TestHeatFortran(t *testing.T) {
	dir := build(t)
	nativetest.Need(t, hasFortran, "no Fortran compiler (gfortran) on PATH")
	sc := nativetest.Serve(t)
	dump := t.TempDir()
	out, rc := run(t, 5*time.Minute, nil, filepath.Join(dir, "heat2d_f"), sc.URL, sc.ShmDir, "heat-f", "96", "64", "60",
		"10", "1e-3", dump)
	if rc != 0 {
		t.Fatalf("heat2d_f: exit %d\n%s", rc, out)
	}
	// t(nx, ny) in Fortran is stored with dims [ny, nx].
	checkRun(t, sc, out, "heat-f", "temperature", "f64", []uint64{64, 96}, 1e-3, everyStep(10, 60), dump)
}

// TestFortranArrayOrder: a(i,j,k) = i + 100 j + 10000 k published from
// Fortran is stored with the extents reversed and element a(i,j,k) at C
// index [k-1][j-1][i-1].
func TestFortranArrayOrder(t *testing.T) {
	dir := build(t)
	nativetest.Need(t, hasFortran, "no Fortran compiler (gfortran) on PATH")
	sc := nativetest.Serve(t)
	out, rc := run(t, 5*time.Minute, nil, filepath.Join(dir, "fortran_test_dims"), sc.URL, sc.ShmDir, "fdims")
	if rc != 0 {
		t.Fatalf("fortran_test_dims: exit %d\n%s", rc, out)
	}
	const n1, n2, n3 = 5, 4, 3
	cases := []struct {
		v     string
		dtype string
		dims  []uint64
		bound float64
	}{
		{"r4_1d", "f32", []uint64{n1}, 1e-6}, {"r4_2d", "f32", []uint64{n2, n1}, 1e-6},
		{"r4_3d", "f32", []uint64{n3, n2, n1}, 1e-6}, {"r8_1d", "f64", []uint64{n1}, 1e-9},
		{"r8_2d", "f64", []uint64{n2, n1}, 1e-9}, {"r8_3d", "f64", []uint64{n3, n2, n1}, 1e-9},
		{"r8_3d_put", "f64", []uint64{n3, n2, n1}, 1e-9},
	}
	for _, c := range cases {
		rows := listSteps(t, sc, "fdims", c.v)
		if len(rows) != 1 || fmt.Sprint(rows[0].Dims) != fmt.Sprint(c.dims) || rows[0].DType != c.dtype {
			t.Fatalf("%s: stored %+v, want one step of %s %v", c.v, rows, c.dtype, c.dims)
		}
		got := getValues(t, sc, "fdims", c.v, 0, c.dtype)
		idx := 0
		// C order: the last dim (Fortran's first index i) runs fastest.
		kmax, jmax := 1, 1
		if len(c.dims) == 3 {
			kmax = n3
		}
		if len(c.dims) >= 2 {
			jmax = n2
		}
		for k := 1; k <= kmax; k++ {
			for j := 1; j <= jmax; j++ {
				for i := 1; i <= n1; i++ {
					want := float64(i)
					if len(c.dims) >= 2 {
						want += 100 * float64(j)
					}
					if len(c.dims) == 3 {
						want += 10000 * float64(k)
					}
					if math.Abs(got[idx]-want) > c.bound*(1+1e-6) {
						t.Fatalf("%s: value %d (a(%d,%d,%d)) is %g, want %g", c.v, idx, i, j, k, got[idx], want)
					}
					idx++
				}
			}
		}
		if idx != len(got) {
			t.Fatalf("%s: %d values, want %d", c.v, len(got), idx)
		}
	}
}

// TestPython runs python/tests/test_producer.py and the numpy example
// against real sidecars, with the package imported from the checkout.
func TestPython(t *testing.T) {
	dir := build(t)
	py := nativetest.PythonModules(t, "numpy", "pytest")
	root := nativetest.RepoRoot(t)
	sc := nativetest.Serve(t)
	small := nativetest.Serve(t, "--budget", "1MiB")
	env := []string{"PYTHONPATH=" + filepath.Join(root, "python"), "PYTHONDONTWRITEBYTECODE=1",
		"FZ_LIBFZPRODUCER=" + filepath.Join(dir, "libfzproducer.so"), "FZ_TEST_URL=" + sc.URL,
		"FZ_TEST_SHM_DIR=" + sc.ShmDir, "FZ_TEST_SINK=" + sc.Sink, "FZ_TEST_FZSIDECAR=" + sc.Bin,
		"FZ_TEST_SMALL_URL=" + small.URL, "FZ_TEST_SMALL_SHM_DIR=" + small.ShmDir}
	out, rc := run(t, 8*time.Minute, env, py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
		filepath.Join(root, "python", "tests", "test_producer.py"))
	t.Logf("pytest:\n%s", out)
	if rc != 0 {
		t.Fatalf("pytest failed (exit %d)", rc)
	}
	if strings.Contains(out, "skipped") {
		t.Fatalf("pytest skipped tests that must run here")
	}

	dump := t.TempDir()
	out, rc = run(t, 5*time.Minute, env, py, filepath.Join(root, "python", "examples", "numpy_producer.py"),
		"--url", sc.URL, "--shm-dir", sc.ShmDir, "--run", "numpy-ex", "--shape", "16,24,32", "--steps", "40",
		"--every", "10", "--dump", dump)
	if rc != 0 {
		t.Fatalf("numpy_producer.py: exit %d\n%s", rc, out)
	}
	checkRun(t, sc, out, "numpy-ex", "density", "f32", []uint64{16, 24, 32}, 1e-3, everyStep(10, 40), dump)
}

// TestNoSpace: a segment larger than what is left on its filesystem fails at
// fzp_begin (fallocate's ENOSPC) with a message, not with SIGBUS later. It
// mounts a 1 MiB tmpfs, which needs root (CAP_SYS_ADMIN).
func TestNoSpace(t *testing.T) {
	dir := build(t)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		skiplog.Skipf(t, "SKIPPED: cannot mount a 1 MiB tmpfs for the ENOSPC check (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	sc := nativetest.Serve(t)
	out, rc := run(t, 2*time.Minute, []string{"FZ_TEST_URL=" + sc.URL, "FZ_TEST_SHM_DIR=" + sc.ShmDir, "FZ_TEST_FULL_DIR=" + mnt},
		filepath.Join(dir, "tests", "test_enospc"))
	if rc != 0 {
		t.Fatalf("test_enospc: exit %d\n%s", rc, out)
	}
	t.Logf("%s", out)
}

// minimalExamples are the programs docs/PRODUCERS.md quotes in full.
var minimalExamples = []struct{ lang, file, run string }{
	{"c", "producer/examples/minimal.c", "minimal-c"},
	{"fortran", "producer/examples/minimal.f90", "minimal-f"},
	{"python", "python/examples/minimal_producer.py", "minimal-py"},
}

// TestMinimalExamples runs the C, Fortran and Python examples of
// docs/PRODUCERS.md and checks the field each stored: f[j][i] = i*j.
func TestMinimalExamples(t *testing.T) {
	dir := build(t)
	root := nativetest.RepoRoot(t)
	sc := nativetest.Serve(t)
	for _, ex := range minimalExamples {
		t.Run(ex.lang, func(t *testing.T) {
			var out string
			var rc int
			switch ex.lang {
			case "c":
				out, rc = run(t, 2*time.Minute, nil, filepath.Join(dir, "minimal"), sc.URL, sc.ShmDir)
			case "fortran":
				nativetest.Need(t, hasFortran, "no Fortran compiler (gfortran) on PATH")
				out, rc = run(t, 2*time.Minute, nil, filepath.Join(dir, "minimal_f"), sc.URL, sc.ShmDir)
			case "python":
				py := nativetest.PythonModules(t, "numpy")
				out, rc = run(t, 2*time.Minute, []string{"PYTHONPATH=" + filepath.Join(root, "python"),
					"FZ_LIBFZPRODUCER=" + filepath.Join(dir, "libfzproducer.so"), "PYTHONDONTWRITEBYTECODE=1"},
					py, filepath.Join(root, ex.file), sc.URL, sc.ShmDir)
			}
			if rc != 0 || !strings.Contains(out, "stored "+ex.run+"/field/000000000000.fz") {
				t.Fatalf("%s: exit %d\n%s", ex.file, rc, out)
			}
			rows := listSteps(t, sc, ex.run, "field")
			if len(rows) != 1 || fmt.Sprint(rows[0].Dims) != "[100 200]" || rows[0].DType != "f32" {
				t.Fatalf("stored %+v, want one f32 [100 200] step", rows)
			}
			got := getValues(t, sc, ex.run, "field", 0, "f32")
			for j := 0; j < 100; j++ {
				for i := 0; i < 200; i++ {
					if d := math.Abs(got[j*200+i] - float64(i*j)); d > rows[0].AbsEB {
						t.Fatalf("f[%d][%d] = %g, want %d within %g", j, i, got[j*200+i], i*j, rows[0].AbsEB)
					}
				}
			}
		})
	}
}

// TestDocsQuoteExamples: docs/PRODUCERS.md shows the examples CI runs,
// verbatim.
func TestDocsQuoteExamples(t *testing.T) {
	root := nativetest.RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "PRODUCERS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range minimalExamples {
		src, err := os.ReadFile(filepath.Join(root, ex.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), strings.TrimSpace(string(src))) {
			t.Errorf("docs/PRODUCERS.md does not quote %s as it is: copy the file into the doc", ex.file)
		}
	}
}

// TestSidecarGone: the sidecar and its embedded NATS server vanish for good
// while producers are connected; publish, begin (both policies), status
// and close each end with an error within their timeouts (test_gone.c).
func TestSidecarGone(t *testing.T) {
	dir := build(t)
	sc := nativetest.Serve(t)
	cmd := exec.Command(filepath.Join(dir, "tests", "test_gone"))
	cmd.Env = append(os.Environ(), "FZ_TEST_URL="+sc.URL, "FZ_TEST_SHM_DIR="+sc.ShmDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	done := make(chan struct{})
	killMe := make(chan struct{}, 1)
	go func() {
		defer close(done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			out.WriteString(s.Text() + "\n")
			if s.Text() == "KILL ME" {
				killMe <- struct{}{}
			}
		}
	}()
	select {
	case <-killMe:
		sc.Kill()
		stdin.Write([]byte("go\n"))
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("test_gone did not get ready within 2 minutes")
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("test_gone hangs after the sidecar was killed:\n%s%s", out.String(), stderr.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("test_gone: %v\n%s%s", err, out.String(), stderr.String())
	}
	t.Logf("%s", out.String())
}
