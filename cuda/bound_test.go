package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestFinishContainerBound (host only): the device's bound and step are
// taken only when they equal fz.DeriveBound's; an overflowing range (the
// device's +Inf) sends the field to the CPU, an overflowing bound is
// refused with fz's message.
func TestFinishContainerBound(t *testing.T) {
	p := fz.Params{DType: fz.Float64, Dims: []uint64{1}, Mode: fz.Rel, Bound: 1e-3}
	g, err := fz.PlanGeometry(p.Dims, 4)
	if err != nil {
		t.Fatal(err)
	}
	hsz := headerSize(p, g)
	// The device's result for [-1.7e308, 1.7e308] today: +Inf, MaxFloat64.
	res := result{absEB: math.Inf(1), step: math.MaxFloat64, rangeMin: -1.7e308, rangeMax: 1.7e308, haveRange: 1}
	var st fz.Stats
	if err := finishContainer(p, g, fz.DefaultVersion, res, make([]byte, hsz), hsz, 1, nil, &st); !errors.Is(err, errBoundOnHost) {
		t.Fatalf("overflowing range: %v, want errBoundOnHost (CPU fallback)", err)
	}
	p.Bound = 2
	if err := finishContainer(p, g, fz.DefaultVersion, res, make([]byte, hsz), hsz, 1, nil, &st); err == nil || !strings.Contains(err.Error(), "exceeds the largest float64") {
		t.Fatalf("overflowing bound: %v, want a refusal", err)
	}
}

// TestRangeOverflowMatchesCPU: f64 fields whose max − min exceeds the
// largest float64 give the CPU's bytes on both GPU paths.
func TestRangeOverflowMatchesCPU(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(11, 12))
	v := make([]float64, 100_000)
	for i := range v {
		v[i] = (r.Float64()*2 - 1) * 1.7e308
	}
	raw := f64bytes(v)
	s := newStreamer(t, 0, StreamOptions{JobTiles: 16, ArenaBytes: 64 << 20, StageBytes: 4 << 20})
	for _, rel := range []float64{1e-3, 0.5, 3} {
		for _, ver := range formatVersions {
			opts := withVersion(ver, fz.WithTilesPerChunk(4))
			p := fz.Params{DType: fz.Float64, Dims: []uint64{uint64(len(v))}, Mode: fz.Rel, Bound: rel}
			check(t, g, fmt.Sprintf("range overflow v%d", ver), raw, p, opts...)
			want, wst, err := fz.Compress(context.Background(), raw, p, opts...)
			if err != nil {
				if _, _, serr := s.Compress(context.Background(), Source{Bytes: raw}, p, opts...); serr == nil {
					t.Fatalf("rel %g v%d: CPU refused (%v), streamer did not", rel, ver, err)
				}
				continue
			}
			checkStreamed(t, s, fmt.Sprintf("range overflow streamed v%d", ver), Source{Bytes: raw}, p, want, wst, opts...)
			copied := 0
			guarded := func(dst, src []byte) error { copied++; copy(dst, src); return nil }
			checkStreamed(t, s, fmt.Sprintf("range overflow streamed, guarded copy v%d", ver), Source{Bytes: raw, Copy: guarded}, p, want, wst, opts...)
			if copied == 0 {
				t.Fatalf("rel %g: the guarded copy was never used", rel)
			}
		}
	}
}
