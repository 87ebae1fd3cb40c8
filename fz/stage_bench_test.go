package fz

import (
	"testing"
)

// Stage micro-benchmarks on the smooth 3D field (rel 1e-3 of its range):
// per-value cost of each encoder stage, streaming over the whole field or
// repeating one tile that stays in cache. ns/op is per tile; divide by 4096.
func stageSetup(b *testing.B) (*layout, *quantizer, *tileScratch) {
	l, err := newLayout([]uint64{128, 256, 256}, defaultShape(3), DefaultTilesPerChunk)
	if err != nil {
		b.Fatal(err)
	}
	lo, hi, _ := valueRange(benchSrc, &quantizer{}, 1)
	eb := 1e-3 * (hi - lo)
	return l, &quantizer{eb: eb, step: 2 * eb, inv: 1 / (2 * eb)}, new(tileScratch)
}

func BenchmarkStageQuantize(b *testing.B) {
	l, qz, s := stageSetup(b)
	for _, mode := range []string{"stream", "cached"} {
		b.Run(mode, func(b *testing.B) {
			var st tileStats
			t := uint64(0)
			for b.Loop() {
				z0, y0, x0, lz, ly, lx := l.tileBox(t)
				s.holes, s.fill, s.raw, s.rawVal = s.holes[:0], s.fill[:0], s.raw[:0], s.rawVal[:0]
				quantizeTile(s, &st, benchSrc, l, z0, y0, x0, lz, ly, lx, qz)
				if mode == "stream" {
					t = (t + 1) % l.tiles
				}
			}
		})
	}
}

func BenchmarkStageEncodeTile(b *testing.B) {
	l, qz, s := stageSetup(b)
	for _, mode := range []string{"stream", "cached"} {
		b.Run(mode, func(b *testing.B) {
			var st tileStats
			t := uint64(0)
			dst := make([]byte, 0, 64<<10)
			for b.Loop() {
				dst = encodeTile(s, &st, benchSrc, l, t, qz, dst[:0])
				if mode == "stream" {
					t = (t + 1) % l.tiles
				}
			}
		})
	}
}
