package fz

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestFlatRatios measures box against flat tiles on the narrow reference
// fields (docs/FORMAT.md §3.1 and §9 quote it): FZ_EXPERIMENT=1 go test
// ./fz -run FlatRatios -v.
func TestFlatRatios(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	dir := sharedData(t)
	for _, f := range realFields {
		switch f.name {
		case "era5_t2m_uk_744x33x49.f32", "plot3d_comb_density_25x33x57.f32", "plot3d_post_energy_38x76x38.f32":
		default:
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		g, _ := PlanGeometryFor(f.dtype, f.dims, DefaultTilesPerChunk, TilingAuto)
		for _, ver := range []int{1, 2} {
			line := fmt.Sprintf("%s v%d (auto: flat %v):", f.name, ver, g.Flat)
			for _, tl := range []Tiling{TilingBoxes, TilingFlat} {
				line += " " + tl.String()
				for _, rel := range []float64{1e-2, 1e-3, 1e-4} {
					p := Params{DType: f.dtype, Dims: f.dims, Mode: Rel, Bound: rel, Fill: f.fill}
					blob, st, err := Compress(context.Background(), raw, p, WithTiling(tl), WithFormatVersion(ver))
					if err != nil {
						t.Fatal(err)
					}
					h, out, err := Decompress(context.Background(), blob)
					if err != nil {
						t.Fatal(err)
					}
					if q, err := Verify(h, raw, out); err != nil || q.Violations != 0 {
						t.Fatalf("%s %s rel %g: %v, %d violations", f.name, tl, rel, err, q.Violations)
					}
					line += fmt.Sprintf(" %.2f", st.Ratio())
				}
			}
			t.Log(line)
		}
	}
}
