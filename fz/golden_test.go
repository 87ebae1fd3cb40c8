package fz

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

type goldenCase struct {
	Name  string   `json:"name"`
	DType string   `json:"dtype"`
	Dims  []uint64 `json:"dims"`
	Mode  string   `json:"mode"`
	Bound float64  `json:"bound"`
	Fill  *float64 `json:"fill,omitempty"`
	// Tiling is the tiling written ("flat" or "padded"; empty: boxes).
	Tiling string `json:"tiling,omitempty"`
}

// goldenInputs makes the inputs from code; they are committed too, so the
// test reads the committed bytes, and -update rewrites both.
func goldenInputs() map[string][]byte {
	in := map[string][]byte{}
	v := make([]float32, 12*20*40)
	for i := range v {
		z, y, x := i/(20*40), (i/40)%20, i%40
		v[i] = float32(20*math.Sin(float64(x)/7+float64(z)/3) + 5*math.Cos(float64(y)/5) + 0.01*float64(i%13))
	}
	in["smooth3d"] = asBytes(v)
	w := make([]float64, 3000)
	for i := range w {
		w[i] = 300 + 10*math.Sin(float64(i)/40)
		switch i % 97 {
		case 3:
			w[i] = math.Float64frombits(0x7FF8000000000123)
		case 5:
			w[i] = math.Inf(1)
		case 7:
			w[i] = math.Inf(-1)
		case 11, 12, 13:
			w[i] = -1e34
		case 17:
			w[i] = 1e300
		}
	}
	in["specials"] = asBytes(w)
	img := make([]float32, 70*90)
	for i := range img {
		y, x := i/90, i%90
		img[i] = float32(math.Exp(-float64((x-40)*(x-40)+(y-30)*(y-30))/200) * 1000)
		if (x*7+y*13)%101 == 0 {
			img[i] += 5000 // cosmic-ray-like spikes
		}
	}
	in["image2d"] = asBytes(img)
	c := make([]float32, 25)
	for i := range c {
		c[i] = 273.15
	}
	in["constant"] = asBytes(c)
	// Residuals (abs 0.5: step 1, q = value) at the escape thresholds of
	// both versions: |d| = 32766 is a code in both, 32767 an escape only in
	// version 2, 32768 an escape in both; 5000 values: a clipped last tile.
	e := make([]float32, 5000)
	q := int32(0)
	for i := 1; i < len(e); i++ {
		d := int32(i%7) - 3
		switch i % 61 {
		case 10, 4100 % 61:
			d = []int32{32766, -32766, 32767, -32767, 32768, -32768}[(i/61)%6]
		case 11:
			d = -[]int32{32766, -32766, 32767, -32767, 32768, -32768}[(i/61)%6]
		}
		q += d
		e[i] = float32(q)
	}
	in["residuals"] = asBytes(e)
	// Flat tiles (§3.1): a narrow 3-D grid whose runs start mid-row, with
	// a last partial tile, fill values, NaN and a few spikes.
	f := make([]float32, 10*21*37)
	for i := range f {
		z, y, x := i/(21*37), (i/37)%21, i%37
		f[i] = float32(280 + 15*math.Sin(float64(x)/6+float64(z)/4) + 8*math.Cos(float64(y)/4) + 0.05*float64(i%7))
		switch {
		case x < 4 && y > 12:
			f[i] = -1e34 // a land corner
		case i%211 == 0:
			f[i] = float32(math.NaN())
		case i%307 == 5:
			f[i] += 400
		}
	}
	in["flat3d"] = asBytes(f)
	// Flat tiles in float64 with escapes (abs 0.5: step 1), ±Inf and huge
	// values, ny·nx = 2000 (a run spans two planes).
	g := make([]float64, 3*40*50)
	for i := range g {
		g[i] = 1000 * math.Sin(float64(i)/90)
		switch i % 173 {
		case 3:
			g[i] += 70000
		case 9:
			g[i] = math.Inf(-1 + 2*(i%2))
		case 17:
			g[i] = 1e300
		}
	}
	in["flatescapes"] = asBytes(g)
	// Padded box tiles (§3.2): flat3d's field, clipped along z (10 = 8 + 2),
	// y (21 = 16 + 5) and x (37 = 32 + 5), its land corner, NaN and spikes
	// at the edges repeated into the padding.
	in["padded3d"] = in["flat3d"]
	return in
}

var goldenCases = []goldenCase{
	{"smooth3d", "f32", []uint64{12, 20, 40}, "rel", 1e-3, nil, ""},
	{"specials", "f64", []uint64{3000}, "abs", 0.01, ptr(-1e34), ""},
	{"image2d", "f32", []uint64{70, 90}, "rel", 1e-2, nil, ""},
	{"constant", "f32", []uint64{5, 5}, "rel", 1e-3, nil, ""},
	{"residuals", "f32", []uint64{5000}, "abs", 0.5, nil, ""},
	{"flat3d", "f32", []uint64{10, 21, 37}, "rel", 1e-3, ptr(-1e34), "flat"},
	{"flatescapes", "f64", []uint64{3, 40, 50}, "abs", 0.5, nil, "flat"},
	{"padded3d", "f32", []uint64{10, 21, 37}, "rel", 1e-3, ptr(-1e34), "padded"},
}

// goldenVersions are the container versions with golden files: version v
// of case c is testdata/golden/c.fz (v = 1) or c.v<v>.fz.
var goldenVersions = []int{1, 2}

func goldenName(c string, v int) string {
	if v == 1 {
		return c + ".fz"
	}
	return fmt.Sprintf("%s.v%d.fz", c, v)
}

func TestGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	if *updateGolden {
		os.MkdirAll(dir, 0o755)
		ins := goldenInputs()
		for _, c := range goldenCases {
			if err := os.WriteFile(filepath.Join(dir, c.Name+".raw"), ins[c.Name], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		man, _ := json.MarshalIndent(goldenCases, "", "  ")
		os.WriteFile(filepath.Join(dir, "cases.json"), append(man, '\n'), 0o644)
	}
	man, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(man, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		raw, err := os.ReadFile(filepath.Join(dir, c.Name+".raw"))
		if err != nil {
			t.Fatal(err)
		}
		dt, _ := ParseDType(c.DType)
		mode, _ := ParseMode(c.Mode)
		p := Params{DType: dt, Dims: c.Dims, Mode: mode, Bound: c.Bound, Fill: c.Fill}
		for _, ver := range goldenVersions {
			goldenCheck(t, dir, c, p, raw, ver)
			if meanPlaceholderCases[c.Name] {
				goldenOldCheck(t, dir, c, p, raw, ver)
			}
		}
	}
}

// meanPlaceholderCases are the cases whose golden files changed when
// writers went from the tile's mean q to the mean q of each z-plane as the
// holes' placeholder (docs/FORMAT.md §4, "Holes"; tiles of one plane kept
// their bytes). Their files as written before are kept in
// testdata/golden/mean-placeholder (same names) and are never rewritten:
// readers must keep decoding them.
var meanPlaceholderCases = map[string]bool{"padded3d": true}

// goldenOldCheck decodes case c's version-ver container written with the
// tile's mean as placeholder: no reader uses the placeholder, so it decodes
// bit for bit to what the current golden file decodes to (and so within the
// bound), though its bytes differ.
func goldenOldCheck(t *testing.T, dir string, c goldenCase, p Params, raw []byte, ver int) {
	t.Helper()
	oldPath := filepath.Join(dir, "mean-placeholder", goldenName(c.Name, ver))
	old, err := os.ReadFile(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(filepath.Join(dir, goldenName(c.Name, ver)))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(old, cur) {
		t.Errorf("%s: the same bytes as the current golden file: not a mean-placeholder file", oldPath)
	}
	ho, outOld, err := Decompress(context.Background(), old)
	if err != nil {
		t.Fatalf("%s: %v", oldPath, err)
	}
	hc, outCur, err := Decompress(context.Background(), cur)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	if ho.Version != hc.Version || ho.Flat != hc.Flat || ho.Padded != hc.Padded || ho.Step != hc.Step || ho.AbsEB != hc.AbsEB {
		t.Errorf("%s: header (v%d flat %v padded %v step %g bound %g) differs from the current file's (v%d %v %v %g %g)",
			oldPath, ho.Version, ho.Flat, ho.Padded, ho.Step, ho.AbsEB, hc.Version, hc.Flat, hc.Padded, hc.Step, hc.AbsEB)
	}
	if !bytes.Equal(outOld, outCur) {
		t.Errorf("%s: decodes to other bytes than the current golden file", oldPath)
	}
	// And within the bound (fill, NaN and ±Inf bit for bit) on its own;
	// goldenCheck has pinned the current file's header, so its AbsEB.
	verifyGolden(t, p.DType, raw, old, hc.AbsEB, c.Fill)
}

// goldenCheck compresses raw as version ver and compares the bytes with
// the committed file (rewriting it with -update).
func goldenCheck(t *testing.T, dir string, c goldenCase, p Params, raw []byte, ver int) {
	t.Helper()
	{
		tiling := TilingBoxes
		if c.Tiling != "" {
			var err error
			if tiling, err = ParseTiling(c.Tiling); err != nil {
				t.Fatal(err)
			}
		}
		blob, st, err := Compress(context.Background(), raw, p, WithFormatVersion(ver), WithTiling(tiling))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		path := filepath.Join(dir, goldenName(c.Name, ver))
		if *updateGolden {
			if err := os.WriteFile(path, blob, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(blob, want) {
			t.Errorf("%s: compressed bytes differ from %s (%d vs %d bytes): the format or the encoder changed; if deliberate, run go test ./fz -run Golden -update and say so in docs/FORMAT.md", c.Name, path, len(blob), len(want))
		}
		// The committed container decodes within the bound.
		if h := verifyGolden(t, p.DType, raw, want, st.AbsEB, c.Fill); int(h.Version) != ver || h.Flat != (tiling == TilingFlat) || h.Padded != (tiling == TilingPadded) {
			t.Errorf("%s: version %d flat %v padded %v, want %d %v %v", path, h.Version, h.Flat, h.Padded, ver, tiling == TilingFlat, tiling == TilingPadded)
		}
	}
}

func verifyGolden(t *testing.T, dt DType, raw, blob []byte, eb float64, fill *float64) *Header {
	t.Helper()
	if dt == Float32 {
		return verify(t, asFloats[float32](raw), blob, eb, fill)
	}
	return verify(t, asFloats[float64](raw), blob, eb, fill)
}
