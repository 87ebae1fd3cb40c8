package fz

import (
	"context"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// Fields of ../shared/data with the FZ-GPU reference ratios of
// ../shared/notes/anchors.md at REL 1e-2, 1e-3, 1e-4 (nil: field has fill
// values, so no reference).
var realFields = []struct {
	name  string
	dtype DType
	dims  []uint64
	fill  *float64
	ref   []float64
}{
	{"adk_md_x_98x3341.f32", Float32, []uint64{98, 3341}, nil, []float64{11.37, 6.10, 3.77}},
	{"coads_SST_12x90x180.f32", Float32, []uint64{12, 90, 180}, ptr(-1e34), nil},
	{"csm_b003_TS_100x64x128.f32", Float32, []uint64{100, 64, 128}, nil, []float64{9.81, 5.70, 3.61}},
	{"csm_b020_T_18x64x128.f32", Float32, []uint64{18, 64, 128}, nil, []float64{10.80, 7.49, 4.56}},
	{"era5_t2m_uk_744x33x49.f32", Float32, []uint64{744, 33, 49}, nil, []float64{9.33, 5.77, 3.66}},
	{"hst_acs_j8bt06nyq_SCI_1024x1024.f32", Float32, []uint64{1024, 1024}, nil, []float64{9.23, 5.10, 3.36}},
	{"hyg_stars_x_107857.f32", Float32, []uint64{107857}, nil, []float64{6.38, 3.91, 2.79}},
	{"hyg_stars_y_107857.f32", Float32, []uint64{107857}, nil, []float64{6.33, 3.88, 2.78}},
	{"levitus_TEMP_20x180x360.f32", Float32, []uint64{20, 180, 360}, ptr(-1e10), nil},
	{"mpas_surface_pressure_163842.f64", Float64, []uint64{163842}, nil, []float64{5.41, 3.44, 2.64}},
	{"plot3d_comb_density_25x33x57.f32", Float32, []uint64{25, 33, 57}, nil, []float64{7.93, 4.65, 3.15}},
	{"plot3d_post_energy_38x76x38.f32", Float32, []uint64{38, 76, 38}, nil, []float64{11.23, 7.75, 4.89}},
	{"stageIV_precip6h_881x1121.f32", Float32, []uint64{881, 1121}, nil, []float64{53.96, 27.62, 17.29}},
}

func ptr(f float64) *float64 { return &f }

func sharedData(t testing.TB) string {
	dir := os.Getenv("FZ_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		skiplog.Skipf(t, "SKIP: real fields not found at %s (set FZ_SHARED_DATA): %v", dir, err)
	}
	return dir
}

// TestRealFields checks the strict bound on every real field and the ratio
// floor against the FZ-GPU reference; it logs the ratio table.
func TestRealFields(t *testing.T) {
	dir := sharedData(t)
	rels := []float64{1e-2, 1e-3, 1e-4}
	var logSum float64
	var logN int
	for _, f := range realFields {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		for i, rel := range rels {
			p := Params{DType: f.dtype, Dims: f.dims, Mode: Rel, Bound: rel, Fill: f.fill}
			blob, st, err := Compress(context.Background(), raw, p)
			if err != nil {
				t.Fatalf("%s rel %g: %v", f.name, rel, err)
			}
			if f.dtype == Float32 {
				verify(t, asFloats[float32](raw), blob, st.AbsEB, f.fill)
			} else {
				verify(t, asFloats[float64](raw), blob, st.AbsEB, f.fill)
			}
			ratio := st.Ratio()
			msg := ""
			if f.ref != nil {
				ref := f.ref[i]
				if f.dtype == Float64 {
					ratio /= 2 // the reference ran this field as f32
				}
				msg = "ref " + ftoa(ref) + " gain " + ftoa(ratio/ref)
				logSum += math.Log(ratio / ref)
				logN++
				if ratio < ref {
					t.Errorf("%s rel %g: ratio %.3f below the FZ-GPU reference %.2f", f.name, rel, ratio, ref)
				}
			}
			t.Logf("%-38s rel %-6g ratio %8.3f max_err/eb %.4f outliers %d %s", f.name, rel, ratio, st.MaxAbsErr/st.AbsEB, st.Outliers, msg)
		}
	}
	if logN > 0 {
		t.Logf("geometric mean gain over FZ-GPU: %.3f", math.Exp(logSum/float64(logN)))
	}
}

func ftoa(f float64) string { return trimFloat(f) }
