package fz

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestTileShapeExperiment is a measurement, not a check: run with
// FZ_EXPERIMENT=1 to print the ratio gain of candidate tile shapes.
func TestTileShapeExperiment(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	dir := sharedData(t)
	shapes := map[int][]shape{
		1: {{[3]int{1, 1, 4096}, [3]int{1, 1, 128}}},
		2: {{[3]int{1, 64, 64}, [3]int{1, 8, 16}}, {[3]int{1, 64, 64}, [3]int{1, 16, 8}}, {[3]int{1, 64, 64}, [3]int{1, 4, 32}},
			{[3]int{1, 128, 32}, [3]int{1, 8, 16}}, {[3]int{1, 32, 128}, [3]int{1, 8, 16}}},
		3: {{[3]int{16, 16, 16}, [3]int{4, 4, 8}}, {[3]int{16, 16, 16}, [3]int{2, 8, 8}}, {[3]int{16, 16, 16}, [3]int{8, 4, 4}},
			{[3]int{8, 16, 32}, [3]int{4, 4, 8}}, {[3]int{8, 16, 32}, [3]int{2, 4, 16}}, {[3]int{4, 32, 32}, [3]int{2, 8, 8}}},
	}
	defer func() { defaultShape = defaultShapeOf }()
	for rank := 1; rank <= 3; rank++ {
		for _, sh := range shapes[rank] {
			defaultShape = func(r int) shape {
				if r == rank {
					return sh
				}
				return defaultShapeOf(r)
			}
			var ls float64
			var n int
			line := ""
			for _, f := range realFields {
				if f.ref == nil {
					continue
				}
				if _, _, _, r := foldDims(f.dims); r != rank {
					continue
				}
				raw, _ := os.ReadFile(filepath.Join(dir, f.name))
				for i, rel := range []float64{1e-2, 1e-3, 1e-4} {
					_, st, err := Compress(context.Background(), raw, Params{DType: f.dtype, Dims: f.dims, Mode: Rel, Bound: rel})
					if err != nil {
						t.Fatal(err)
					}
					r := st.Ratio()
					if f.dtype == Float64 {
						r /= 2
					}
					g := r / f.ref[i]
					ls += math.Log(g)
					n++
					line += fmt.Sprintf(" %.3f", g)
				}
			}
			t.Logf("rank %d tile %v: geomean gain %.4f |%s", rank, sh, math.Exp(ls/float64(n)), line)
		}
	}
}
