// Package synth generates deterministic synthetic fields for demos,
// benchmarks and tests.
package synth

import "math"

// Smooth returns a smooth float32 field of shape nz×ny×nx (C order) at time
// t: sums of low-frequency waves with some finer structure, like a
// temperature or pressure snapshot of a simulation.
func Smooth(nz, ny, nx int, t float64) []float32 {
	v := make([]float32, nz*ny*nx)
	// Per-axis tables keep generation cheap for GB-sized fields.
	sx := make([]float64, nx)
	kx := make([]float64, nx)
	cx := make([]float64, nx)
	for x := range sx {
		fx := float64(x) / float64(max(nx, 1))
		sx[x] = math.Sin(6*fx + t)
		kx[x] = math.Cos(6*fx + t)
		cx[x] = math.Cos(40 * fx)
	}
	i := 0
	for z := 0; z < nz; z++ {
		fz := float64(z) / float64(max(nz, 1))
		cz := math.Cos(4*fz + 0.3*t)
		for y := 0; y < ny; y++ {
			fy := float64(y) / float64(max(ny, 1))
			// 100·cz·sin(6fx + t + 2fy) expanded so the inner loop has no trig.
			a := 100 * cz * math.Cos(2*fy)
			b := 100 * cz * math.Sin(2*fy)
			c := 30*math.Sin(13*fy*fz+0.5*t) + 10*fz
			d := 5 * fy
			row := v[i : i+nx]
			for x := range row {
				row[x] = float32(a*sx[x] + b*kx[x] + c + d*cx[x])
			}
			i += nx
		}
	}
	return v
}
