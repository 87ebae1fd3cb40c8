package fz

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeRatioTable checks the README's compression-ratio table against
// the CPU codec on the real fields: one row per field of realFields, its three
// ratios (REL 1e-2, 1e-3, 1e-4; f64 counted against 4 bytes a value, as the
// FZ-GPU reference ran it) and its gain over the reference within rounding to
// two decimals, "no reference" where the field has fill values. v40 replaced
// two of its rows with GPU speed rows meant for another table and no test saw
// it.
func TestReadmeRatioTable(t *testing.T) {
	dir := sharedData(t)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const head = "| field | REL 1e-2 | 1e-3 | 1e-4 | gain vs FZ-GPU |"
	_, rest, ok := strings.Cut(string(readme), head+"\n")
	if !ok {
		t.Fatalf("README.md has no ratio table (header %q)", head)
	}
	rows := map[string][]string{}                        // the row's first word -> its cells
	for _, line := range strings.Split(rest, "\n")[1:] { // after the |---| line
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		name, _, _ := strings.Cut(cells[0], " ")
		if _, dup := rows[name]; dup {
			t.Errorf("README ratio table: field %s has two rows", name)
		}
		rows[name] = cells
	}
	if len(rows) != len(realFields) {
		t.Errorf("README ratio table has %d rows, expected one for each of the %d real fields", len(rows), len(realFields))
	}
	for _, f := range realFields {
		var cells []string
		for name, c := range rows {
			if strings.HasPrefix(f.name, name) {
				cells = c
			}
		}
		if cells == nil {
			t.Errorf("README ratio table: no row for %s", f.name)
			continue
		}
		if len(cells) != 5 {
			t.Errorf("README ratio table, %s: %d cells %q, expected 5 (field, three ratios, gain)", f.name, len(cells), cells)
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		var gains []string
		for i, rel := range []float64{1e-2, 1e-3, 1e-4} {
			_, st, err := Compress(context.Background(), raw, Params{DType: f.dtype, Dims: f.dims, Mode: Rel, Bound: rel, Fill: f.fill})
			if err != nil {
				t.Fatalf("%s rel %g: %v", f.name, rel, err)
			}
			ratio := st.Ratio()
			if f.dtype == Float64 {
				ratio /= 2
			}
			checkCell(t, f.name, fmt.Sprintf("ratio at rel %g", rel), cells[1+i], ratio)
			if f.ref != nil {
				gains = append(gains, strconv.FormatFloat(ratio/f.ref[i], 'f', -1, 64))
			}
		}
		if f.ref == nil {
			if !strings.HasPrefix(cells[4], "no reference") {
				t.Errorf("README ratio table, %s: gain %q, expected \"no reference\" (fill values)", f.name, cells[4])
			}
			continue
		}
		parts := strings.Split(cells[4], "/")
		if len(parts) != 3 {
			t.Errorf("README ratio table, %s: gain %q, expected three values a / b / c", f.name, cells[4])
			continue
		}
		for i, g := range gains {
			v, _ := strconv.ParseFloat(g, 64)
			checkCell(t, f.name, fmt.Sprintf("gain at rel %g", []float64{1e-2, 1e-3, 1e-4}[i]), strings.TrimSpace(parts[i]), v)
		}
	}
}

// checkCell: the README's cell is want rounded to two decimals, or rounded
// from want's three decimals (the table was written from TestRealFields's log):
// within 0.0055.
func checkCell(t *testing.T, field, what, cell string, want float64) {
	t.Helper()
	v, err := strconv.ParseFloat(cell, 64)
	if err != nil {
		t.Errorf("README ratio table, %s %s: %q is not a number", field, what, cell)
		return
	}
	if math.Abs(v-want) > 0.0055+1e-9 {
		t.Errorf("README ratio table, %s %s: %s, the CPU codec gives %.3f", field, what, cell, want)
	}
}
