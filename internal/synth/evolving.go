// Evolving fields are filled in place (no allocation, any dims, either
// dtype), as a producer writes straight into a shared-memory segment. The
// values depend only on (dims, variable index, step), so a test can
// regenerate what a producer published.

package synth

import "math"

// Fill32 writes the field of variable vi at step into v (C order, dims
// slowest → fastest; len(v) must equal the product of dims).
func Fill32(v []float32, dims []uint64, vi int, step uint64) {
	fill(dims, vi, step, func(i int, x float64) { v[i] = float32(x) }, len(v))
}

// Fill64 is Fill32 for float64.
func Fill64(v []float64, dims []uint64, vi int, step uint64) {
	fill(dims, vi, step, func(i int, x float64) { v[i] = x }, len(v))
}

// fill evaluates, over normalized coordinates x (fastest), y, z (the next
// two; outer dims shift the phase), travelling waves whose phase advances
// with the step, plus a per-variable offset and scale, so consecutive steps
// differ smoothly like real time steps.
func fill(dims []uint64, vi int, step uint64, set func(int, float64), n int) {
	if n == 0 || len(dims) == 0 {
		return
	}
	nx := int(dims[len(dims)-1])
	if nx == 0 {
		return
	}
	t := float64(step)
	fv := float64(vi)
	scale := 1 + 0.5*fv
	sx := make([]float64, nx)
	sx2 := make([]float64, nx)
	for i := range sx {
		x := float64(i) / float64(nx)
		sx[i] = math.Sin(2 * math.Pi * (x + 0.02*t + 0.1*fv))
		sx2[i] = math.Sin(2 * math.Pi * (7*x - 0.05*t))
	}
	ny, nz := 1, 1
	if len(dims) >= 2 {
		ny = int(dims[len(dims)-2])
	}
	if len(dims) >= 3 {
		nz = int(dims[len(dims)-3])
	}
	rows := n / nx
	for r := 0; r < rows; r++ {
		yi := r % max(ny, 1)
		zi := (r / max(ny, 1)) % max(nz, 1)
		outer := r / (max(ny, 1) * max(nz, 1))
		y := float64(yi) / float64(max(ny, 1))
		z := float64(zi) / float64(max(nz, 1))
		cy := math.Cos(2 * math.Pi * (y - 0.015*t))
		sz := 0.5 * math.Sin(2*math.Pi*(z+0.01*t)+0.3*float64(outer))
		base := r * nx
		for i := 0; i < nx; i++ {
			set(base+i, scale*(sx[i]*cy+sz+0.05*sx2[i]*cy)+0.1*fv)
		}
	}
}
