package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
)

// BenchConfig drives RunBench.
type BenchConfig struct {
	Bytes   uint64    // field size (at least; real fields are tiled up to it)
	Reps    int       // timed runs per measurement (median reported)
	DataDir string    // real fields; "" skips them
	Rels    []float64 // relative bounds
	Fields  []string  // only fields whose name starts with one of these ("smooth3d", "hyg"); nil: all
	Log     io.Writer // progress lines; nil for none
	// FormatVersion is the container version written and read (1 or 2;
	// 0: fz.DefaultVersion).
	FormatVersion uint16
	// Tiling is the tile geometry written (docs/FORMAT.md 3, 3.1, 3.2; the
	// zero value: box tiles; TilingAuto resolved per field).
	Tiling fz.Tiling
	// File is a raw field of the user's own (row-major, little-endian),
	// measured in addition to the others; nil: none.
	File *BenchFile
}

// BenchFile is a raw field file and how to read it.
type BenchFile struct {
	Path  string
	DType fz.DType
	Dims  []uint64
	Fill  *float64 // the field's fill value; nil: none
}

// BenchCase is one field at one bound.
type BenchCase struct {
	Field         string   `json:"field"`
	DType         string   `json:"dtype"`
	Dims          []uint64 `json:"dims"`
	Rel           float64  `json:"rel"`
	InputBytes    uint64   `json:"input_bytes"`
	Ratio         float64  `json:"ratio"`
	CompressMs    float64  `json:"compress_ms"`
	DecompressMs  float64  `json:"decompress_ms"`
	CompressBps   float64  `json:"compress_bytes_per_s"`
	DecompressBps float64  `json:"decompress_bytes_per_s"`
	CompressX     float64  `json:"compress_vs_memcpy"`
	DecompressX   float64  `json:"decompress_vs_memcpy"`
	Violations    int      `json:"bound_violations"`
	FormatVersion uint16   `json:"format_version"`
	Tiling        string   `json:"tiling"`         // the tiles written: boxes, flat or padded (auto resolved)
	Fill          *float64 `json:"fill,omitempty"` // the fill value the field was compressed with
}

// BenchReport is the whole run.
type BenchReport struct {
	Device    string      `json:"device"`
	Reps      int         `json:"reps"`
	CopyBytes uint64      `json:"copy_bytes"`
	D2DBps    float64     `json:"memcpy_d2d_bytes_per_s"`
	H2DBps    float64     `json:"pinned_h2d_bytes_per_s"`
	D2HBps    float64     `json:"pinned_d2h_bytes_per_s"`
	Cases     []BenchCase `json:"cases"`
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

type timer struct {
	lib    *library
	dev    int32
	stream uintptr
	e0, e1 uintptr
}

// newTimer times work enqueued on stream with a pair of CUDA events.
func newTimer(l *library, dev int32, stream uintptr) (*timer, error) {
	t := &timer{lib: l, dev: dev, stream: stream}
	if err := l.cerr(l.eventCreate(dev, &t.e0), "event"); err != nil {
		return nil, err
	}
	if err := l.cerr(l.eventCreate(dev, &t.e1), "event"); err != nil {
		l.eventDestroy(dev, t.e0)
		return nil, err
	}
	return t, nil
}

func (t *timer) close() { t.lib.eventDestroy(t.dev, t.e0); t.lib.eventDestroy(t.dev, t.e1) }

// median times f (which enqueues work on the timer's stream) reps times
// after one warm-up, in milliseconds.
func (t *timer) median(reps int, f func() error) (float64, error) {
	l := t.lib
	var ms []float64
	for i := -1; i < reps; i++ {
		if err := l.cerr(l.eventRecord(t.dev, t.e0, t.stream), "record"); err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
		if err := l.cerr(l.eventRecord(t.dev, t.e1, t.stream), "record"); err != nil {
			return 0, err
		}
		var m float32
		if err := l.cerr(l.eventElapsed(t.dev, t.e0, t.e1, &m), "elapsed"); err != nil {
			return 0, err
		}
		if i >= 0 {
			ms = append(ms, float64(m))
		}
	}
	return median(ms), nil
}

// RunBench measures copy bandwidths and warm kernel-only codec throughput
// on one GPU.
func RunBench(ctx context.Context, cfg BenchConfig) (*BenchReport, error) {
	if cfg.Reps < 1 {
		cfg.Reps = 20
	}
	ver, err := fz.FormatVersionOf(fz.WithFormatVersion(int(cfg.FormatVersion)))
	if err != nil {
		return nil, err
	}
	cfg.FormatVersion = ver
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	// One job must cover a whole field: scratch for its tiles (f32 3D with
	// ~1 GiB has 65536 tiles; f64 tiles hold the same count of values).
	jobTiles := (cfg.Bytes/4)/4096 + 8192
	b, err := OpenDevice(0, jobTiles)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	l := b.lib
	rep := &BenchReport{Device: b.Name(), Reps: cfg.Reps, CopyBytes: cfg.Bytes}
	tm, err := newTimer(l, b.dev, b.stream)
	if err != nil {
		return nil, err
	}
	defer tm.close()

	// Copies.
	S := cfg.Bytes
	var d1, d2 uintptr
	if err := l.cerr(l.malloc(b.dev, S, &d1), "allocate"); err != nil {
		return nil, err
	}
	defer l.free(b.dev, d1)
	if err := l.cerr(l.malloc(b.dev, S, &d2), "allocate"); err != nil {
		return nil, err
	}
	defer l.free(b.dev, d2)
	l.memsetAsync(b.dev, d1, 1, S, b.stream)
	ms, err := tm.median(cfg.Reps, func() error { return l.cerr(l.copyD2D(b.dev, d2, d1, S, 3, b.stream), "D2D") })
	if err != nil {
		return nil, err
	}
	rep.D2DBps = float64(S) / (ms / 1e3)
	var hp unsafe.Pointer
	if err := l.cerr(l.hostAlloc(S, &hp), "pinned allocation"); err != nil {
		return nil, err
	}
	ms, err = tm.median(cfg.Reps, func() error { return l.cerr(l.copyH2D(b.dev, d1, hp, S, 1, b.stream), "H2D") })
	if err == nil {
		rep.H2DBps = float64(S) / (ms / 1e3)
		ms, err = tm.median(cfg.Reps, func() error { return l.cerr(l.copyD2H(b.dev, hp, d1, S, 2, b.stream), "D2H") })
		rep.D2HBps = float64(S) / (ms / 1e3)
	}
	l.hostFree(hp)
	if err != nil {
		return nil, err
	}
	logf("device %s: D2D %.1f GB/s, pinned H2D %.1f GB/s, D2H %.1f GB/s", b.Name(), rep.D2DBps/1e9, rep.H2DBps/1e9, rep.D2HBps/1e9)

	want := func(name string) bool {
		if len(cfg.Fields) == 0 {
			return cfg.File == nil // --file alone measures only the file
		}
		for _, p := range cfg.Fields {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	type input struct {
		realField // dims as tiled up to the bench's size
		raw       []byte
	}
	var inputs []func() (input, error)
	smooth := func() (input, error) {
		nz, ny, nx := uint64(256), uint64(1024), S/4/(256*1024)
		raw := make([]byte, 4*nz*ny*nx)
		parallelChunks(int(nz), 0, func(z int) {
			for y := uint64(0); y < ny; y++ {
				for x := uint64(0); x < nx; x++ {
					fz_, fy, fx := float64(z)/float64(nz), float64(y)/float64(ny), float64(x)/float64(nx)
					v := math.Sin(6*fz_+1)*math.Cos(9*fy) + 0.5*math.Sin(13*fx+5*fy) + fz_*fx
					binary.LittleEndian.PutUint32(raw[4*((uint64(z)*ny+y)*nx+x):], math.Float32bits(float32(v)))
				}
			}
		})
		return input{realField{"smooth3d", fz.Float32, []uint64{nz, ny, nx}, nil}, raw}, nil
	}
	if want("smooth3d") {
		inputs = append(inputs, smooth)
	}
	if cfg.DataDir != "" {
		for _, f := range benchFields {
			if !want(f.name) {
				continue
			}
			inputs = append(inputs, func() (input, error) {
				one, err := os.ReadFile(filepath.Join(cfg.DataDir, f.name))
				if err != nil {
					return input{}, err
				}
				raw, dims := tileUp(one, f.dims, S)
				return input{realField{f.name, f.dtype, dims, f.fill}, raw}, nil
			})
		}
	}
	if f := cfg.File; f != nil {
		inputs = append(inputs, func() (input, error) {
			one, err := os.ReadFile(f.Path)
			if err != nil {
				return input{}, err
			}
			n, err := fz.NumElements(f.Dims)
			if err != nil {
				return input{}, fmt.Errorf("%s: %w", f.Path, err)
			}
			if want := n * uint64(f.DType.Size()); uint64(len(one)) != want || n == 0 {
				return input{}, fmt.Errorf("%s: %d bytes, but dims %s of %s need %d", f.Path, len(one),
					fz.FormatDims(f.Dims), f.DType, want)
			}
			raw, dims := tileUp(one, f.Dims, S)
			return input{realField{filepath.Base(f.Path), f.DType, dims, f.Fill}, raw}, nil
		})
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("no bench field matches %q (smooth3d, or a real field's name with --data)", cfg.Fields)
	}
	for _, mk := range inputs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		in, err := mk()
		if err != nil {
			return nil, err
		}
		for _, rel := range cfg.Rels {
			c, err := b.benchOne(tm, in.realField, in.raw, rel, cfg.Reps, rep.D2DBps, cfg.FormatVersion, cfg.Tiling)
			if err != nil {
				return nil, fmt.Errorf("%s rel %g: %w", in.name, rel, err)
			}
			logf("%-38s rel %-6g ratio %7.2f  compress %6.1f GB/s (%.2fx memcpy)  decompress %6.1f GB/s (%.2fx)  violations %d",
				c.Field, rel, c.Ratio, c.CompressBps/1e9, c.CompressX, c.DecompressBps/1e9, c.DecompressX, c.Violations)
			rep.Cases = append(rep.Cases, c)
		}
	}
	return rep, nil
}

// tileUp repeats a field's bytes along its slowest dimension until they
// hold at least size bytes: the bench's fields of 1 GiB from small files.
func tileUp(one []byte, dims []uint64, size uint64) ([]byte, []uint64) {
	reps := (size + uint64(len(one)) - 1) / uint64(len(one))
	raw := make([]byte, 0, reps*uint64(len(one)))
	for i := uint64(0); i < reps; i++ {
		raw = append(raw, one...)
	}
	d := append([]uint64(nil), dims...)
	d[0] *= reps
	return raw, d
}

// realField is one of the real fields (under --data, or FZ_SHARED_DATA for
// the tests): its file name, dtype, dims and fill value.
type realField struct {
	name  string
	dtype fz.DType
	dims  []uint64
	fill  *float64
}

// benchFields are the real fields, for the benchmark and the tests (in this
// order). The fields with a fill value (land in the ocean fields) are
// compressed with it, as their users would: without it, fill values of
// -1e34 are ordinary values that stretch the REL range.
var benchFields = []realField{
	{"adk_md_x_98x3341.f32", fz.Float32, []uint64{98, 3341}, nil},
	{"coads_SST_12x90x180.f32", fz.Float32, []uint64{12, 90, 180}, benchFill(-1e34)},
	{"csm_b003_TS_100x64x128.f32", fz.Float32, []uint64{100, 64, 128}, nil},
	{"csm_b020_T_18x64x128.f32", fz.Float32, []uint64{18, 64, 128}, nil},
	{"era5_t2m_uk_744x33x49.f32", fz.Float32, []uint64{744, 33, 49}, nil},
	{"hst_acs_j8bt06nyq_SCI_1024x1024.f32", fz.Float32, []uint64{1024, 1024}, nil},
	{"hyg_stars_x_107857.f32", fz.Float32, []uint64{107857}, nil},
	{"hyg_stars_y_107857.f32", fz.Float32, []uint64{107857}, nil},
	{"levitus_TEMP_20x180x360.f32", fz.Float32, []uint64{20, 180, 360}, benchFill(-1e10)},
	{"mpas_surface_pressure_163842.f64", fz.Float64, []uint64{163842}, nil},
	{"plot3d_comb_density_25x33x57.f32", fz.Float32, []uint64{25, 33, 57}, nil},
	{"plot3d_post_energy_38x76x38.f32", fz.Float32, []uint64{38, 76, 38}, nil},
	{"stageIV_precip6h_881x1121.f32", fz.Float32, []uint64{881, 1121}, nil},
}

func benchFill(v float64) *float64 { return &v }

// benchOne times compress and decompress of one field already on the host.
func (b *Backend) benchOne(tm *timer, fld realField, raw []byte, rel float64, reps int, d2d float64, ver uint16, tiling fz.Tiling) (BenchCase, error) {
	l := b.lib
	name, dt, dims := fld.name, fld.dtype, fld.dims
	p := fz.Params{DType: dt, Dims: dims, Mode: fz.Rel, Bound: rel, Fill: fld.fill}
	g, err := fz.PlanGeometryFor(dt, dims, fz.DefaultTilesPerChunk, tiling)
	if err != nil {
		return BenchCase{}, err
	}
	if !onGPU(dt, g) {
		return BenchCase{}, fmt.Errorf("%s: the CPU codec's geometry (flat tiles with planes of 2^24 values or more, or padded tiles outside f32 rank 3)", name)
	}
	if g.Tiles > b.maxTiles {
		if err := b.ensureCtx(g.Tiles); err != nil {
			return BenchCase{}, err
		}
	}
	f := compressField(p, g, ver)
	if err := b.grow(&b.a, &b.aCap, uint64(len(raw))); err != nil {
		return BenchCase{}, err
	}
	outCap := l.compressBound(f.dtype, g.Tiles)
	if err := b.grow(&b.b, &b.bCap, outCap); err != nil {
		return BenchCase{}, err
	}
	if err := b.h2d(b.a, raw); err != nil {
		return BenchCase{}, err
	}
	cms, err := tm.median(reps, func() error {
		if err := l.cerr(l.prepare(b.ctx, b.stream, &f, b.a), "prepare"); err != nil {
			return err
		}
		return l.cerr(l.compress(b.ctx, b.stream, &f, b.a, 0, g.Chunks, b.b, b.bCap, b.res), "compress")
	})
	if err != nil {
		return BenchCase{}, err
	}
	if err := b.sync("compress"); err != nil {
		return BenchCase{}, err
	}
	res := b.result()
	if res.status != 0 {
		return BenchCase{}, l.cerr(int32(res.status), "compress")
	}
	hsz := uint64(92+8*len(dims)) + g.Chunks*24 + 4
	blob := make([]byte, hsz+res.bytes)
	if err := b.d2h(blob[hsz:], b.b); err != nil {
		return BenchCase{}, err
	}
	h := fz.NewHeader(p, g, res.absEB, res.step, res.rangeMin, res.rangeMax, res.haveRange != 0)
	h.Version = ver
	if err := indexChunks(h, g, blob, hsz, 0, nil); err != nil {
		return BenchCase{}, err
	}
	h.PutHeader(blob)
	// decode: blob into b.b (its capacity covers the bound), field into b.a
	if err := b.h2d(b.b, blob); err != nil {
		return BenchCase{}, err
	}
	fd := decodeField(h, g)
	dms, err := tm.median(reps, func() error {
		return l.cerr(l.decompress(b.ctx, b.stream, &fd, b.b, uint64(len(blob)), h.IndexOffset(), 0, g.Chunks, b.a, b.res), "decompress")
	})
	if err != nil {
		return BenchCase{}, err
	}
	if err := b.sync("decompress"); err != nil {
		return BenchCase{}, err
	}
	if r := b.result(); r.status != 0 {
		return BenchCase{}, fmt.Errorf("decompress: tile %d: %s", r.errTile, decodeReasons[r.errCode])
	}
	out := make([]byte, len(raw))
	if err := b.d2h(out, b.a); err != nil {
		return BenchCase{}, err
	}
	viol := 0
	if v := violations(raw, out, h); v != "" {
		viol = 1
		fmt.Fprintln(os.Stderr, name, v)
	}
	in := float64(len(raw))
	return BenchCase{
		Field: name, DType: dt.String(), Dims: dims, Rel: rel, InputBytes: uint64(len(raw)),
		Ratio: in / float64(len(blob)), CompressMs: cms, DecompressMs: dms,
		CompressBps: in / (cms / 1e3), DecompressBps: in / (dms / 1e3),
		CompressX: in / (cms / 1e3) / d2d, DecompressX: in / (dms / 1e3) / d2d, Violations: viol,
		FormatVersion: ver, Tiling: g.Tiling().String(), Fill: fld.fill,
	}, nil
}
