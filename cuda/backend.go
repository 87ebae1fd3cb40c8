package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// DefaultJobTiles is how many tiles one device job covers (64 Mi values):
// the context's scratch and output buffer are sized for it once.
const DefaultJobTiles = 16384

// Backend runs the codec on one GPU. It implements fz.Backend. Calls are
// serialised: one job at a time on its own stream.
type Backend struct {
	lib      *library
	dev      int32
	name     string
	mu       sync.Mutex
	ctx      uintptr
	stream   uintptr
	maxTiles uint64
	res      unsafe.Pointer // pinned fzgpu_result
	// grow-only device buffers: a is the field, b the compressed bytes
	a, b       uintptr
	aCap, bCap uint64
}

var _ fz.Backend = (*Backend)(nil)

// Available reports whether the library loads and sees a device, and why not.
func Available() (bool, error) {
	l, err := loadLibrary()
	if err != nil {
		return false, err
	}
	var n int32
	if rc := l.deviceCount(&n); rc != 0 || n == 0 {
		if rc == 0 {
			rc = 4
		}
		return false, l.cerr(rc, "no usable CUDA device")
	}
	return true, nil
}

// Open loads the library and creates a backend on device 0.
func Open() (*Backend, error) { return OpenDevice(0, DefaultJobTiles) }

// OpenDevice creates a backend on device dev whose jobs hold up to
// jobTiles tiles (raised to a chunk when a field's chunks are larger).
func OpenDevice(dev int, jobTiles uint64) (*Backend, error) {
	l, name, mem, err := openDevice(dev)
	if err != nil {
		return nil, err
	}
	b := &Backend{lib: l, dev: int32(dev)}
	b.name = fmt.Sprintf("gpu (%s, %.0f GiB, %s)", name, float64(mem)/(1<<30), l.path)
	if err := l.cerr(l.streamCreate(b.dev, &b.stream), "create stream"); err != nil {
		return nil, err
	}
	if err := l.cerr(l.hostAlloc(uint64(unsafe.Sizeof(result{})), &b.res), "pinned result"); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.ensureCtx(max(jobTiles, 1)); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Name says which device this is.
func (b *Backend) Name() string { return b.name }

// Close frees the device resources.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lib
	if b.ctx != 0 {
		l.destroy(b.ctx)
		b.ctx = 0
	}
	for _, p := range []*uintptr{&b.a, &b.b} {
		if *p != 0 {
			l.free(b.dev, *p)
			*p = 0
		}
	}
	b.aCap, b.bCap = 0, 0
	if b.res != nil {
		l.hostFree(b.res)
		b.res = nil
	}
	if b.stream != 0 {
		l.streamDestroy(b.dev, b.stream)
		b.stream = 0
	}
	return nil
}

func (b *Backend) ensureCtx(tiles uint64) error {
	if b.ctx != 0 && b.maxTiles >= tiles {
		return nil
	}
	if b.ctx != 0 {
		b.lib.destroy(b.ctx)
		b.ctx = 0
	}
	if err := b.lib.cerr(b.lib.create(b.dev, tiles, &b.ctx), "create GPU context"); err != nil {
		return err
	}
	b.maxTiles = tiles
	return nil
}

// grow makes *p a device buffer of at least n bytes. It runs per field,
// never per job.
func (b *Backend) grow(p *uintptr, capp *uint64, n uint64) error {
	if *capp >= n && *p != 0 {
		return nil
	}
	if *p != 0 {
		b.lib.free(b.dev, *p)
		*p, *capp = 0, 0
	}
	if err := b.lib.cerr(b.lib.malloc(b.dev, n, p), fmt.Sprintf("allocate %d bytes on the GPU", n)); err != nil {
		return err
	}
	*capp = n
	return nil
}

func (b *Backend) sync(what string) error {
	return b.lib.cerr(b.lib.streamSync(b.dev, b.stream), what)
}

func (b *Backend) h2d(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return b.lib.cerr(b.lib.copyH2D(b.dev, dst, unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), 1, b.stream), "copy to GPU")
}

func (b *Backend) d2h(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := b.lib.cerr(b.lib.copyD2H(b.dev, unsafe.Pointer(unsafe.SliceData(dst)), src, uint64(len(dst)), 2, b.stream), "copy from GPU"); err != nil {
		return err
	}
	return b.sync("copy from GPU")
}

func (b *Backend) result() result { return *(*result)(b.res) }

func makeField(dt fz.DType, g fz.Geometry) field {
	f := field{dtype: uint32(dt), nz: g.NZ, ny: g.NY, nx: g.NX, tilesPerChunk: uint32(g.TilesPerChunk), version: 1}
	switch {
	case g.Flat:
		f.tiling = 1
	case g.Padded && hasClippedTiles(g):
		// without a clipped tile, padded tiles are box tiles byte for byte,
		// and the box kernels take them
		f.tiling = 2
	}
	for i := 0; i < 3; i++ {
		f.tile[i], f.block[i] = uint32(g.Tile[i]), uint32(g.Block[i])
	}
	return f
}

// onGPU says whether the kernels take a field of dtype dt and geometry g:
// flat tiles (docs/FORMAT.md 3.1) only with planes of fewer than 2^24
// values (the kernels' in-tile arithmetic is 32-bit: cuda/flat.cuh), padded
// box tiles (3.2) with clipped tiles only for f32 in rank-3 tiles (the
// padded kernels are the staged f32 rank-3 walks: cuda/encode_rank3.cuh);
// the CPU codec writes and reads the same bytes for the others.
func onGPU(dt fz.DType, g fz.Geometry) bool {
	if g.Padded && hasClippedTiles(g) {
		return dt == fz.Float32 && g.Tile == [3]int{8, 16, 32} && g.Block == [3]int{4, 4, 8}
	}
	return !g.Flat || (g.NY <= 1<<24 && g.NX <= 1<<24 && g.NY*g.NX < 1<<24)
}

// hasClippedTiles says whether a box-tiled field has a tile clipped by its
// far edges.
func hasClippedTiles(g fz.Geometry) bool {
	return g.NZ%uint64(g.Tile[0]) != 0 || g.NY%uint64(g.Tile[1]) != 0 || g.NX%uint64(g.Tile[2]) != 0
}

// compressField is the field the kernels compress for p: its geometry, the
// container version ver written, the bound and the fill value.
func compressField(p fz.Params, g fz.Geometry, ver uint16) field {
	f := makeField(p.DType, g)
	f.version = uint32(ver)
	f.mode, f.bound = uint32(p.Mode), p.Bound
	if bits, ok := fz.FillBits(p); ok {
		f.hasFill, f.fillBits = 1, bits
	}
	return f
}

// decodeField is the field the kernels decode from a container whose
// header is h and geometry g.
func decodeField(h *fz.Header, g fz.Geometry) field {
	f := makeField(h.DType, g)
	f.version = uint32(h.Version)
	f.step = h.Step
	if h.Fill != nil {
		f.hasFill, f.fillBits = 1, h.FillBits
	}
	return f
}

// jobs cuts chunks into runs of at most maxTiles tiles.
func jobs(g fz.Geometry, maxTiles uint64) [][2]uint64 {
	per := max(1, maxTiles/g.TilesPerChunk)
	var out [][2]uint64
	for c := uint64(0); c < g.Chunks; c += per {
		out = append(out, [2]uint64{c, min(per, g.Chunks-c)})
	}
	return out
}

// Compress encodes src on the GPU; the bytes equal fz.Compress's.
func (b *Backend) Compress(ctx context.Context, src []byte, p fz.Params, opts ...fz.Option) ([]byte, fz.Stats, error) {
	if err := p.Validate(int64(len(src))); err != nil {
		return nil, fz.Stats{}, err
	}
	set := fz.SettingsOf(opts...)
	ver, err := fz.FormatVersionOf(opts...)
	if err != nil {
		return nil, fz.Stats{}, err
	}
	g, err := fz.PlanGeometryFor(p.DType, p.Dims, set.TilesPerChunk, set.Tiling)
	if err != nil {
		return nil, fz.Stats{}, err
	}
	if g.Elements == 0 || !onGPU(p.DType, g) {
		return fz.CPU().Compress(ctx, src, p, opts...)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ensureCtx(max(b.maxTiles, g.TilesPerChunk)); err != nil {
		return nil, fz.Stats{}, err
	}
	f := compressField(p, g, ver)
	l := b.lib
	if err := b.grow(&b.a, &b.aCap, uint64(len(src))); err != nil {
		return nil, fz.Stats{}, err
	}
	outCap := l.compressBound(f.dtype, b.maxTiles)
	if err := b.grow(&b.b, &b.bCap, outCap); err != nil {
		return nil, fz.Stats{}, err
	}
	if err := b.h2d(b.a, src); err != nil {
		return nil, fz.Stats{}, err
	}
	if err := l.cerr(l.prepare(b.ctx, b.stream, &f, b.a), "GPU compress"); err != nil {
		return nil, fz.Stats{}, err
	}
	hsz := headerSize(p, g)
	out := make([]byte, hsz, hsz+uint64(len(src))/3+4096)
	st := fz.Stats{RawBytes: uint64(len(src))}
	var res result
	for _, j := range jobs(g, b.maxTiles) {
		if err := ctx.Err(); err != nil {
			return nil, fz.Stats{}, fmt.Errorf("compress: %w", err)
		}
		if err := l.cerr(l.compress(b.ctx, b.stream, &f, b.a, j[0], j[1], b.b, b.bCap, b.res), "GPU compress"); err != nil {
			return nil, fz.Stats{}, err
		}
		if err := b.sync("GPU compress"); err != nil {
			return nil, fz.Stats{}, err
		}
		res = b.result()
		if res.status != 0 {
			return nil, fz.Stats{}, l.cerr(int32(res.status), "GPU compress")
		}
		at := len(out)
		out = append(out, make([]byte, res.bytes)...)
		if err := b.d2h(out[at:], b.b); err != nil {
			return nil, fz.Stats{}, err
		}
		st.Outliers += res.outliers
		st.MaxAbsErr = max(st.MaxAbsErr, res.maxAbsErr)
		if set.Progress != nil {
			_, end := g.ChunkTiles(j[0] + j[1] - 1)
			set.Progress(uint64(len(src))*end/g.Tiles, uint64(len(src)))
		}
	}
	if err := finishContainer(p, g, ver, res, out, hsz, set.Workers, nil, &st); errors.Is(err, errBoundOnHost) {
		return fz.CPU().Compress(ctx, src, p, opts...)
	} else if err != nil {
		return nil, fz.Stats{}, err
	}
	return out, st, nil
}

// errBoundOnHost says the device derived another bound or step than
// fz.DeriveBound (a value range wider than the largest float64): the
// field is compressed on the CPU instead, so the bytes stay the same.
var errBoundOnHost = errors.New("the GPU's error bound differs from fz.DeriveBound's")

// headerSize is the bytes before the first chunk: header, index, CRC.
func headerSize(p fz.Params, g fz.Geometry) uint64 {
	return uint64(92+8*len(p.Dims)) + g.Chunks*24 + 4
}

// finishContainer writes the header (container version ver) and chunk
// index into out[:hsz] for the chunks the device wrote after it (res is
// the last job's result) and completes st.
// crcs, if not nil, are the chunks' CRC32C computed on the device
// (fzgpu_gather), one per chunk; else the host computes them.
func finishContainer(p fz.Params, g fz.Geometry, ver uint16, res result, out []byte, hsz uint64, workers int, crcs []uint32, st *fz.Stats) error {
	// The bound rule lives in fz.DeriveBound; the device computes it too
	// (its range is there) but not past the float64 range (then it has
	// +Inf): such a field is refused, or redone on the CPU.
	absEB, step, err := fz.DeriveBound(p, res.rangeMin, res.rangeMax, res.haveRange != 0)
	if err != nil {
		return err
	}
	if math.Float64bits(absEB) != math.Float64bits(res.absEB) || math.Float64bits(step) != math.Float64bits(res.step) {
		return errBoundOnHost
	}
	h := fz.NewHeader(p, g, absEB, step, res.rangeMin, res.rangeMax, res.haveRange != 0)
	h.Version = ver
	if err := indexChunks(h, g, out, hsz, workers, crcs); err != nil {
		return err
	}
	h.PutHeader(out)
	st.AbsEB = h.AbsEB
	st.CompressedBytes = uint64(len(out))
	return nil
}

// indexChunks fills h.Chunks by walking the chunks' tile tables from hsz
// and checksumming each chunk (in parallel), or taking the device's
// checksums (crcs, one per chunk, where not nil).
func indexChunks(h *fz.Header, g fz.Geometry, out []byte, hsz uint64, workers int, crcs []uint32) error {
	pos := hsz
	for c := range h.Chunks {
		first, end := g.ChunkTiles(uint64(c))
		k := end - first
		if pos+4*k > uint64(len(out)) {
			return fmt.Errorf("GPU output ends inside chunk %d's tile table", c)
		}
		size := 4 * k
		for i := uint64(0); i < k; i++ {
			size += uint64(binary.LittleEndian.Uint32(out[pos+4*i:]))
		}
		h.Chunks[c] = fz.Chunk{Offset: pos, Size: size}
		pos += size
	}
	if pos != uint64(len(out)) {
		return fmt.Errorf("GPU output is %d bytes, its tile tables say %d", len(out), pos)
	}
	if crcs != nil {
		if len(crcs) != len(h.Chunks) {
			return fmt.Errorf("the GPU checksummed %d chunks, the container has %d", len(crcs), len(h.Chunks))
		}
		for c := range h.Chunks {
			h.Chunks[c].CRC = crcs[c]
		}
		return nil
	}
	parallelChunks(len(h.Chunks), workers, func(c int) {
		ch := &h.Chunks[c]
		ch.CRC = fz.CRC32C(out[ch.Offset : ch.Offset+ch.Size])
	})
	return nil
}

func parallelChunks(n, workers int, f func(int)) {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				c := next
				next++
				mu.Unlock()
				if c >= n {
					return
				}
				f(c)
			}
		}()
	}
	wg.Wait()
}

var decodeReasons = map[uint32]string{
	1:  "chunk index entry outside the container",
	2:  "chunk too small for its tile table",
	3:  "tile size invalid (multiple of 4, at least 8, within the chunk, at a 4-byte aligned offset)",
	4:  "bytes after the chunk's last tile",
	5:  "tile header has unknown flags",
	6:  "tile data shorter than its fields",
	7:  "escape count out of range or not equal to the escape codes",
	8:  "tile origin slot holds a non-zero code",
	9:  "mask marks slots outside the tile's values",
	10: "raw-value count does not match its mask",
	11: "tile has trailing bytes",
	12: "code block mask is 0 or marks blocks past the tile's values",
	13: "group rates invalid (a rate word 0, a rate on a group past the tile's values, or a top magnitude unit 0)",
	14: "magnitude bits on slots past the tile's values, or a non-zero padding unit",
	15: "sign bits invalid (unused bits set, or an escape marked negative)",
}

// DecompressTo decodes blob on the GPU into dst (h.RawSize() bytes).
func (b *Backend) DecompressTo(ctx context.Context, blob, dst []byte, opts ...fz.Option) (*fz.Header, error) {
	h, err := fz.ReadHeader(blob)
	if err != nil {
		return nil, err
	}
	if want := h.CompressedSize(); uint64(len(blob)) != want {
		return nil, fz.FormatError("container is %d bytes, its index says %d", len(blob), want)
	}
	if uint64(len(dst)) != h.RawSize() {
		return nil, fmt.Errorf("destination is %d bytes, the field needs %d", len(dst), h.RawSize())
	}
	if h.RawSize() == 0 {
		return h, nil
	}
	g, err := h.Geometry()
	if err != nil {
		return nil, err
	}
	if !onGPU(h.DType, g) {
		return fz.CPU().DecompressTo(ctx, blob, dst, opts...)
	}
	set := fz.SettingsOf(opts...)
	// Checksums on the host: the chunks are untrusted until they match.
	bad := make([]bool, len(h.Chunks))
	parallelChunks(len(h.Chunks), set.Workers, func(c int) {
		ch := h.Chunks[c]
		bad[c] = fz.CRC32C(blob[ch.Offset:ch.Offset+ch.Size]) != ch.CRC
	})
	for c, x := range bad {
		if x {
			return nil, fz.FormatError("chunk %d: checksum mismatch: chunk corrupted", c)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ensureCtx(max(b.maxTiles, g.TilesPerChunk)); err != nil {
		return nil, err
	}
	l := b.lib
	if err := b.grow(&b.a, &b.aCap, h.RawSize()); err != nil {
		return nil, err
	}
	if err := b.grow(&b.b, &b.bCap, uint64(len(blob))); err != nil {
		return nil, err
	}
	if err := b.h2d(b.b, blob); err != nil {
		return nil, err
	}
	if h.Version != 1 && h.Version != 2 {
		return nil, fz.FormatError("container version %d: the GPU decoder reads versions 1 and 2", h.Version)
	}
	f := decodeField(h, g)
	for _, j := range jobs(g, b.maxTiles) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("decompress: %w", err)
		}
		if err := l.cerr(l.decompress(b.ctx, b.stream, &f, b.b, uint64(len(blob)), h.IndexOffset(), j[0], j[1], b.a, b.res), "GPU decompress"); err != nil {
			return nil, err
		}
		if err := b.sync("GPU decompress"); err != nil {
			return nil, err
		}
		if r := b.result(); r.status != 0 {
			first, _ := g.ChunkTiles(j[0])
			t := first + r.errTile
			c := t / g.TilesPerChunk
			return nil, fz.FormatError("chunk %d, tile %d: %s", c, t-c*g.TilesPerChunk, decodeReasons[r.errCode])
		}
	}
	if err := b.d2h(dst, b.a); err != nil {
		return nil, err
	}
	return h, nil
}
