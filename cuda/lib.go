// Package cuda is the GPU backend of fzsidecar: CUDA kernels (fzgpu.cu,
// built by `make -C cuda` into build/libfzgpu.so) and their Go binding.
//
// The library is loaded at run time with purego (no cgo): fzsidecar builds
// with CGO_ENABLED=0 and runs on machines without CUDA; only Open fails
// there. The C library selects the context's device on the calling thread
// in every call (the CUDA runtime binds the device's primary context per
// thread), so calls are safe from any goroutine on any OS thread.
package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// LibName is the shared library's file name.
const LibName = "libfzgpu.so"

const abiVersion = 9

// field mirrors fzgpu_field (96 bytes).
type field struct {
	dtype, mode   uint32
	bound, step   float64
	fillBits      uint64
	hasFill       uint32
	tilesPerChunk uint32
	nz, ny, nx    uint64
	tile, block   [3]uint32
	version       uint32 // container version, 1 or 2
	tiling        uint32 // 0 box tiles, 1 flat tiles (docs/FORMAT.md 3.1), 2 padded box tiles (3.2)
}

// result mirrors fzgpu_result (80 bytes).
type result struct {
	bytes, outliers    uint64
	maxAbsErr          float64
	absEB, step        float64
	rangeMin, rangeMax float64
	haveRange, status  uint32
	errTile            uint64
	errCode, _         uint32
}

var _ [96 - unsafe.Sizeof(field{})]struct{}
var _ [unsafe.Sizeof(field{}) - 96]struct{}
var _ [80 - unsafe.Sizeof(result{})]struct{}
var _ [unsafe.Sizeof(result{}) - 80]struct{}

type library struct {
	path           string
	handle         uintptr // the dlopen handle (ipc.go registers its symbols from it)
	ipc            ipcFuncs
	abiVersion     func() int32
	deviceCount    func(n *int32) int32
	deviceInfo     func(dev int32, name *byte, nameLen uint64, mem *uint64) int32
	strerror       func(rc int32, buf *byte, n uint64)
	create         func(dev int32, maxTiles uint64, out *uintptr) int32
	destroy        func(ctx uintptr)
	compressBound  func(dtype uint32, tiles uint64) uint64
	prepare        func(ctx, stream uintptr, f *field, src uintptr) int32
	compress       func(ctx, stream uintptr, f *field, src uintptr, first, n uint64, out uintptr, cap uint64, res unsafe.Pointer) int32
	decompress     func(ctx, stream uintptr, f *field, blob uintptr, size, indexOff, first, n uint64, dst uintptr, res unsafe.Pointer) int32
	rangeOf        func(ctx, stream uintptr, f *field, src uintptr, n uint64, accumulate int32) int32
	prepareRange   func(ctx, stream uintptr, f *field) int32
	paramsCopy     func(dst, src, stream uintptr) int32
	compressAt     func(ctx, stream uintptr, f *field, src uintptr, elem0, first, n uint64, out uintptr, cap uint64, res unsafe.Pointer) int32
	gather         func(ctx, stream uintptr, f *field, first, n uint64, job uintptr, jobCap uint64, dst uintptr, dstCap uint64, state, crc uintptr) int32
	hostRegisterRO func(p unsafe.Pointer, size uint64) int32
	copyH2DHost    func(dev int32, dst uintptr, src uintptr, size uint64, kind int32, s uintptr) int32
	streamWait     func(dev int32, s, ev uintptr) int32
	eventSync      func(dev int32, ev uintptr) int32
	eventBlocking  func(dev int32, ev *uintptr) int32
	malloc         func(dev int32, size uint64, p *uintptr) int32
	free           func(dev int32, p uintptr) int32
	hostAlloc      func(size uint64, p *unsafe.Pointer) int32
	hostFree       func(p unsafe.Pointer) int32
	hostRegister   func(p unsafe.Pointer, size uint64) int32
	hostUnregister func(p unsafe.Pointer) int32
	streamCreate   func(dev int32, s *uintptr) int32
	streamDestroy  func(dev int32, s uintptr) int32
	streamSync     func(dev int32, s uintptr) int32
	copyH2D        func(dev int32, dst uintptr, src unsafe.Pointer, size uint64, kind int32, s uintptr) int32
	copyD2H        func(dev int32, dst unsafe.Pointer, src uintptr, size uint64, kind int32, s uintptr) int32
	copyD2D        func(dev int32, dst, src uintptr, size uint64, kind int32, s uintptr) int32
	memsetAsync    func(dev int32, p uintptr, value int32, size uint64, s uintptr) int32
	eventCreate    func(dev int32, ev *uintptr) int32
	eventDestroy   func(dev int32, ev uintptr) int32
	eventRecord    func(dev int32, ev, s uintptr) int32
	eventElapsed   func(dev int32, a, b uintptr, ms *float32) int32
}

var (
	libOnce sync.Once
	libVal  *library
	libErr  error
)

// candidates lists where the library is looked for, in order: $FZ_CUDA_LIB,
// next to the executable, cuda/build/ under the working directory (build/
// when the working directory is cuda/ itself, as for go test), then the
// dynamic loader's search path.
func candidates() []string {
	var c []string
	if p := os.Getenv("FZ_CUDA_LIB"); p != "" {
		c = append(c, p)
	}
	if exe, err := os.Executable(); err == nil {
		c = append(c, filepath.Join(filepath.Dir(exe), LibName))
	}
	c = append(c, filepath.Join("cuda", "build", LibName), filepath.Join("build", LibName), LibName)
	return c
}

func loadLibrary() (*library, error) {
	libOnce.Do(func() { libVal, libErr = load() })
	return libVal, libErr
}

func load() (*library, error) {
	var tried []string
	var h uintptr
	var path string
	for _, p := range candidates() {
		if filepath.Base(p) != p || os.Getenv("FZ_CUDA_LIB") == p {
			if _, err := os.Stat(p); err != nil {
				tried = append(tried, fmt.Sprintf("%s (%v)", p, errors.Unwrap(err)))
				continue
			}
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
		}
		var err error
		h, err = purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			path = p
			break
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
	}
	if h == 0 {
		return nil, fmt.Errorf("GPU library %s not found (build it with `make -C cuda` where the CUDA toolkit is, or set FZ_CUDA_LIB); tried: %v", LibName, tried)
	}
	l := &library{path: path, handle: h}
	reg := func(fn any, name string) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%s: symbol %s: %v", path, name, r)
			}
		}()
		purego.RegisterLibFunc(fn, h, name)
		return nil
	}
	for _, f := range []struct {
		fn   any
		name string
	}{
		{&l.abiVersion, "fzgpu_abi_version"}, {&l.deviceCount, "fzgpu_device_count"},
		{&l.deviceInfo, "fzgpu_device_info"}, {&l.strerror, "fzgpu_strerror"},
		{&l.create, "fzgpu_create"}, {&l.destroy, "fzgpu_destroy"},
		{&l.compressBound, "fzgpu_compress_bound"}, {&l.prepare, "fzgpu_prepare"},
		{&l.compress, "fzgpu_compress"}, {&l.decompress, "fzgpu_decompress"},
		{&l.rangeOf, "fzgpu_range"}, {&l.prepareRange, "fzgpu_prepare_range"},
		{&l.paramsCopy, "fzgpu_params_copy"}, {&l.compressAt, "fzgpu_compress_at"}, {&l.gather, "fzgpu_gather"},
		{&l.hostRegisterRO, "fzgpu_host_register_ro"}, {&l.copyH2DHost, "fzgpu_memcpy_async"},
		{&l.streamWait, "fzgpu_stream_wait_event"}, {&l.eventSync, "fzgpu_event_sync"},
		{&l.eventBlocking, "fzgpu_event_create_blocking"},
		{&l.malloc, "fzgpu_malloc"}, {&l.free, "fzgpu_free"},
		{&l.hostAlloc, "fzgpu_host_alloc"}, {&l.hostFree, "fzgpu_host_free"},
		{&l.hostRegister, "fzgpu_host_register"}, {&l.hostUnregister, "fzgpu_host_unregister"},
		{&l.streamCreate, "fzgpu_stream_create"}, {&l.streamDestroy, "fzgpu_stream_destroy"},
		{&l.streamSync, "fzgpu_stream_sync"},
		{&l.copyH2D, "fzgpu_memcpy_async"}, {&l.copyD2H, "fzgpu_memcpy_async"}, {&l.copyD2D, "fzgpu_memcpy_async"},
		{&l.memsetAsync, "fzgpu_memset_async"},
		{&l.eventCreate, "fzgpu_event_create"}, {&l.eventDestroy, "fzgpu_event_destroy"},
		{&l.eventRecord, "fzgpu_event_record"}, {&l.eventElapsed, "fzgpu_event_elapsed"},
	} {
		if err := reg(f.fn, f.name); err != nil {
			return nil, err
		}
	}
	if v := l.abiVersion(); v != abiVersion {
		return nil, fmt.Errorf("%s has ABI version %d, this build needs %d: rebuild it with `make -C cuda`", path, v, abiVersion)
	}
	if err := l.ipc.register(reg); err != nil {
		return nil, err
	}
	return l, nil
}

// cerr turns a library return code into an error.
func (l *library) cerr(rc int32, what string) error {
	if rc == 0 {
		return nil
	}
	var buf [256]byte
	l.strerror(rc, &buf[0], uint64(len(buf)))
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return fmt.Errorf("%s: %s", what, buf[:n])
}

// openDevice loads the library, checks that device dev exists and returns
// its name and memory size.
func openDevice(dev int) (*library, string, uint64, error) {
	if ok, err := Available(); !ok {
		return nil, "", 0, err
	}
	l, _ := loadLibrary()
	var n int32
	l.deviceCount(&n)
	if dev < 0 || int32(dev) >= n {
		return nil, "", 0, fmt.Errorf("CUDA device %d does not exist (%d present)", dev, n)
	}
	var name [256]byte
	var mem uint64
	if err := l.cerr(l.deviceInfo(int32(dev), &name[0], 256, &mem), "device info"); err != nil {
		return nil, "", 0, err
	}
	k := 0
	for k < len(name) && name[k] != 0 {
		k++
	}
	return l, string(name[:k]), mem, nil
}
