package cuda

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// ipcField is a smooth f32 field with noise (nz*ny*nx values).
func ipcField(nz, ny, nx int) []byte {
	raw := make([]byte, 4*nz*ny*nx)
	i := 0
	for z := 0; z < nz; z++ {
		for y := 0; y < ny; y++ {
			for x := 0; x < nx; x++ {
				v := math.Sin(float64(z)/9)*math.Cos(float64(y)/17) + 0.3*math.Sin(float64(x)/5+float64(y)/11) + 1e-3*float64((i*2654435761)%1000)/1000
				binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
				i++
			}
		}
	}
	return raw
}

// The producer side of the IPC tests, run as a separate process (CUDA IPC
// handles cannot be opened by the process that exported them): it copies
// the field file into a fresh allocation at offset 4096, records an
// interprocess event after the copy, prints the handles and waits until
// its stdin closes (or it is killed).
func TestIPCProducerHelper(t *testing.T) {
	path := os.Getenv("FZGPU_IPC_PRODUCER")
	if path == "" {
		t.Skip("helper process of TestDeviceIPC")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := loadLibrary()
	if err != nil {
		t.Fatal(err)
	}
	const off = 4096
	var d, st, ev uintptr
	var mh, eh [64]byte
	must := func(rc int32, what string) {
		if err := l.cerr(rc, what); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
	}
	must(l.malloc(0, uint64(off+len(raw)), &d), "malloc")
	must(l.streamCreate(0, &st), "stream")
	must(l.copyH2D(0, d+off, unsafe.Pointer(&raw[0]), uint64(len(raw)), 1, st), "copy")
	must(l.ipc.exportMem(0, d, &mh[0]), "export")
	must(l.ipc.eventIPC(0, &ev, &eh[0]), "event")
	must(l.eventRecord(0, ev, st), "record")
	fmt.Printf("HANDLES %s %s %d %d\n", hex.EncodeToString(mh[:]), hex.EncodeToString(eh[:]), off+len(raw), off)
	os.Stdout.Sync()
	bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

type ipcProducer struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	snap  DeviceSnapshot
}

func startIPCProducer(t *testing.T, raw []byte, owner string) *ipcProducer {
	t.Helper()
	f := filepath.Join(t.TempDir(), "field.raw")
	if err := os.WriteFile(f, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCProducerHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "FZGPU_IPC_PRODUCER="+f)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &ipcProducer{cmd: cmd, stdin: in}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ERR") {
			t.Fatalf("producer: %s", line)
		}
		var mh, eh string
		var alloc, off uint64
		if n, _ := fmt.Sscanf(line, "HANDLES %s %s %d %d", &mh, &eh, &alloc, &off); n == 4 {
			a, _ := hex.DecodeString(mh)
			b, _ := hex.DecodeString(eh)
			p.snap = DeviceSnapshot{Owner: owner, AllocSize: alloc, Offset: off, Length: uint64(len(raw))}
			copy(p.snap.MemHandle[:], a)
			copy(p.snap.EventHandle[:], b)
			go func() {
				for sc.Scan() {
				}
			}()
			return p
		}
	}
	t.Fatal("the producer process printed no handles")
	return nil
}

func (p *ipcProducer) kill() { p.cmd.Process.Kill(); p.cmd.Wait() }

// A snapshot in another process's GPU memory compresses to the bytes the
// CPU codec makes of the same field; the mapping and event are opened once
// and cached; an allocation size that does not match, garbage handles and
// the handles of a producer that exited are errors of their own kind,
// after which the streamer keeps working.
func TestDeviceIPC(t *testing.T) {
	// Device lanes of one-chunk jobs: 6 jobs a snapshot, so each stream's
	// slot is reused while its exact copy back may still run.
	s := newStreamer(t, 0, StreamOptions{Lanes: 2, ArenaBytes: 64 << 20, DeviceLanes: 2, DeviceJobTiles: 256})
	uuid, err := s.UUID()
	if err != nil || !strings.HasPrefix(uuid, "GPU-") || len(uuid) != 40 {
		t.Fatalf("UUID %q %v", uuid, err)
	}
	t.Logf("%s: %s", s.Name(), uuid)
	ctx := context.Background()
	raw := ipcField(64, 256, 384)
	prod := startIPCProducer(t, raw, "p1")
	dims := []uint64{64, 256, 384}
	fill := -9999.0 // a fill value the field does not hold: the kernels for fields with a fill value
	for _, c := range []struct {
		p   fz.Params
		ver int
	}{
		{fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3}, fz.Version1},
		{fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Abs, Bound: 1e-4}, fz.Version1},
		{fz.Params{DType: fz.Float64, Dims: []uint64{64, 256, 192}, Mode: fz.Rel, Bound: 1e-5}, fz.Version1},
		// container version 2 and a fill value take the same device path
		{fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3}, fz.Version2},
		{fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-4, Fill: &fill}, fz.Version1},
	} {
		opt := fz.WithFormatVersion(c.ver)
		want, _, err := fz.CPU().Compress(ctx, raw, c.p, opt)
		if err != nil {
			t.Fatal(err)
		}
		checkDeviceOutputs(t, s, prod.snap, c.p, raw, want, opt)
	}
	if l, tiles, err := s.DeviceLanes(); l != 2 || tiles != 256 || err != nil {
		t.Fatalf("device lanes %d x %d tiles (%v), want 2 x 256", l, tiles, err)
	}
	if m, e := s.IPCOpen(); m != 1 || e != 1 {
		t.Fatalf("open mappings %d, events %d: want 1 and 1 (cached per producer buffer)", m, e)
	}
	p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3}

	bad := prod.snap
	bad.AllocSize++
	if _, _, _, err := s.CompressDevice(ctx, bad, p); !errors.Is(err, ErrAllocSize) {
		t.Fatalf("wrong alloc_size: %v", err)
	}
	bad = prod.snap
	bad.Offset += 8
	if _, _, _, err := s.CompressDevice(ctx, bad, p); !errors.Is(err, ErrAllocSize) {
		t.Fatalf("beyond the allocation: %v", err)
	}
	bad = prod.snap
	bad.Owner = "p2"
	for i := range bad.MemHandle {
		bad.MemHandle[i] = byte(i * 7)
	}
	if _, _, _, err := s.CompressDevice(ctx, bad, p); !errors.Is(err, ErrStaleHandle) {
		t.Fatalf("garbage memory handle: %v", err)
	} else {
		t.Logf("garbage handle: %v", err)
	}

	// The producer exits: its handles, not cached, cannot be opened.
	prod.kill()
	s.Forget("p1")
	if m, e := s.IPCOpen(); m != 0 || e != 0 {
		t.Fatalf("Forget left %d mappings, %d events open", m, e)
	}
	if _, _, _, err := s.CompressDevice(ctx, prod.snap, p); !errors.Is(err, ErrStaleHandle) {
		t.Fatalf("handles of an exited producer: %v", err)
	} else {
		t.Logf("exited producer: %v", err)
	}
	// The device still works.
	want, _, _ := fz.CPU().Compress(ctx, raw, p)
	got, _, err := s.Compress(ctx, Source{Bytes: raw}, p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("host snapshot after the IPC errors: %v (equal %v)", err, bytes.Equal(got, want))
	}
}

// Device lanes made with exact copy-back (FZ_GPU_EXACT=1) have no pinned
// output slots: a blob too small, or a Go one, takes the rest by copies
// into pageable memory; the bytes are still the CPU's.
func TestDeviceIPCExactLanes(t *testing.T) {
	defer func(e bool) { exactCopyBack = e }(exactCopyBack)
	exactCopyBack = true
	s := newStreamer(t, 0, StreamOptions{Lanes: 1, ArenaBytes: 16 << 20, DeviceLanes: 2, DeviceJobTiles: 512})
	raw := ipcField(64, 256, 384)
	prod := startIPCProducer(t, raw, "px")
	p := fz.Params{DType: fz.Float32, Dims: []uint64{64, 256, 384}, Mode: fz.Rel, Bound: 1e-3}
	want, _, err := fz.CPU().Compress(context.Background(), raw, p)
	if err != nil {
		t.Fatal(err)
	}
	// Made now, under FZ_GPU_EXACT=1 (checkDeviceOutputs flips it).
	if !deviceLanesExact(s) {
		t.Fatal("device lanes made under FZ_GPU_EXACT=1 have pinned slots")
	}
	checkDeviceOutputs(t, s, prod.snap, p, raw, want)
}

// A producer killed while the streamer reads its memory: the call returns
// (stored bytes or an error, never a hang or a crash) and the device keeps
// working.
func TestDeviceIPCProducerKilled(t *testing.T) {
	s := newStreamer(t, 0, StreamOptions{Lanes: 1, ArenaBytes: 64 << 20})
	ctx := context.Background()
	raw := ipcField(256, 512, 512) // 256 MiB
	p := fz.Params{DType: fz.Float32, Dims: []uint64{256, 512, 512}, Mode: fz.Rel, Bound: 1e-4}
	want, _, _ := fz.CPU().Compress(ctx, raw, p)
	for round := 0; round < 3; round++ {
		prod := startIPCProducer(t, raw, fmt.Sprintf("k%d", round))
		done := make(chan error, 1)
		var got []byte
		go func() {
			var err error
			got, _, _, err = s.CompressDevice(ctx, prod.snap, p)
			done <- err
		}()
		time.Sleep(time.Duration(round) * 300 * time.Microsecond)
		prod.kill()
		select {
		case err := <-done:
			switch {
			case err == nil && !bytes.Equal(got, want):
				t.Fatalf("round %d: stored bytes differ from the CPU's", round)
			case err == nil:
				t.Logf("round %d: finished before the producer's memory went away", round)
			default:
				t.Logf("round %d: %v", round, err)
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("round %d: CompressDevice hangs after its producer was killed", round)
		}
		s.Forget(fmt.Sprintf("k%d", round))
	}
	small := ipcField(16, 64, 64)
	sp := fz.Params{DType: fz.Float32, Dims: []uint64{16, 64, 64}, Mode: fz.Abs, Bound: 1e-3}
	w, _, _ := fz.CPU().Compress(ctx, small, sp)
	g, _, err := s.Compress(ctx, Source{Bytes: small}, sp)
	if err != nil || !bytes.Equal(g, w) {
		t.Fatalf("device after killed producers: %v", err)
	}
}

// checkDeviceOutputs compresses a device snapshot into each kind of blob,
// with estimated and with exact copy-back (FZ_GPU_EXACT, flipped here per
// snapshot), and compares each with the CPU's bytes (want): a Go blob; a
// pinned one large enough (exact: written in place by the device); a
// pinned one too small after its first job (the rest goes to Go memory).
// Lanes made with exact copy-back have no pinned slots: there the estimated
// mode is not possible and runs exact.
func checkDeviceOutputs(t *testing.T, s *Streamer, snap DeviceSnapshot, p fz.Params, raw, want []byte, opts ...fz.Option) {
	t.Helper()
	big, err := AllocPinned(uint64(len(want)) + 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer FreePinned(big)
	small, err := AllocPinned(uint64(len(want)) / 3)
	if err != nil {
		t.Fatal(err)
	}
	defer FreePinned(small)
	defer func(e bool) { exactCopyBack = e }(exactCopyBack)
	for _, exact := range []bool{false, true} {
		exactCopyBack = exact
		for _, out := range []struct {
			name string
			b    []byte
		}{{"go blob", nil}, {"pinned blob", big[:0]}, {"pinned blob too small", small[:0]}} {
			sn := snap
			sn.Out, sn.OutPinned = out.b, out.b != nil
			clear(big)
			got, st, tm, err := s.CompressDevice(context.Background(), sn, p, opts...)
			ver, _ := fz.FormatVersionOf(opts...)
			what := fmt.Sprintf("%s %s %g (container version %d), exact %v, %s", p.DType, p.Mode, p.Bound, ver, exact, out.name)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: GPU-resident container differs from the CPU's (%d vs %d bytes, first difference at %d)", what, len(got), len(want), firstDiff(got, want))
			}
			inPlace := len(got) > 0 && out.b != nil && unsafe.SliceData(got) == unsafe.SliceData(out.b[:1])
			// exact copy-back and device assembly both copy into a pinned
			// blob that holds the snapshot
			inPinned := exact || deviceLanesExact(s) || deviceLanesGather(s)
			if wantIn := inPinned && out.name == "pinned blob"; inPlace != wantIn {
				t.Fatalf("%s: blob in the given pinned memory: %v, want %v", what, inPlace, wantIn)
			}
			if tm.GPU <= 0 {
				t.Fatalf("%s: no GPU time reported: %+v", what, tm)
			}
			t.Logf("%s: %d -> %d bytes (ratio %.1f), GPU %v, event wait %v", what, len(raw), len(got), st.Ratio(), tm.GPU, tm.EventWait)
		}
	}
}

// deviceLanesExact says the streamer's device lanes were made with exact
// copy-back (no pinned slots); nothing may be compressing.
func deviceLanesExact(s *Streamer) bool {
	pool, _ := s.deviceLanes()
	ln := <-pool
	defer func() { pool <- ln }()
	return ln.exact
}

// deviceLanesGather says the streamer's device lanes assemble snapshots on
// the device (gather.go), and how many snapshots they ran again into a
// larger buffer; nothing may be compressing.
func deviceLanesGather(s *Streamer) bool {
	g, _ := deviceGatherRedos(s)
	return g
}

func deviceGatherRedos(s *Streamer) (gather bool, redos int) {
	pool, _ := s.deviceLanes()
	var lns []*lane
	for range cap(pool) {
		ln := <-pool
		lns = append(lns, ln)
		gather = gather || ln.gather
		redos += ln.g.redos
	}
	for _, ln := range lns {
		pool <- ln
	}
	return gather, redos
}

// A snapshot whose chunks do not fit the device buffer (an eighth of the
// snapshot at first: here a noisy field at a tight bound, ratio ~1.5) is
// compressed again into one of the size the device counted: the bytes are
// still the CPU's, and the next snapshot fits at once.
func TestDeviceIPCGatherRegrow(t *testing.T) {
	s := newStreamer(t, 0, StreamOptions{Lanes: 1, ArenaBytes: 16 << 20, DeviceLanes: 1, DeviceJobTiles: 256})
	dims := []uint64{64, 256, 384}
	raw := make([]byte, 4*64*256*384)
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < len(raw); i += 4 {
		binary.LittleEndian.PutUint32(raw[i:], math.Float32bits(r.Float32()))
	}
	prod := startIPCProducer(t, raw, "pg")
	p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Abs, Bound: 1e-6}
	want, st, err := fz.CPU().Compress(context.Background(), raw, p)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(want)) <= uint64(len(raw))/8+1<<20 {
		t.Fatalf("the field compresses to %d bytes (ratio %.2f): too well to outgrow the first buffer", len(want), st.Ratio())
	}
	if !deviceLanesGather(s) {
		t.Skip("device lanes do not assemble on the device (FZ_GPU_GATHER=0 or FZ_GPU_EXACT=1 in the environment)")
	}
	for i, wantRedos := range []int{1, 1} {
		got, _, _, err := s.CompressDevice(context.Background(), prod.snap, p)
		if err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("snapshot %d: container differs from the CPU's (%d vs %d bytes, first difference at %d)", i, len(got), len(want), firstDiff(got, want))
		}
		if _, redos := deviceGatherRedos(s); redos != wantRedos {
			t.Fatalf("after snapshot %d: %d snapshots ran again, want %d", i, redos, wantRedos)
		}
	}
}
