package fz

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Flat tiles (docs/FORMAT.md §3.1, header flags bit 1): tile t is the run
// of flat indices [4096t, 4096t+n) of the folded field nz×ny×nx, element
// e in slot e, while Lorenzo and the masks' parity transform keep the
// field's 3-D neighbours. The neighbour (z−a, y−b, x−c) of element e
// exists iff z ≥ a, y ≥ b, x ≥ c and e − a·ny·nx − b·nx − c ≥ 0 (it lies in
// the run); z ≥ a follows from the last condition, since the run starts at
// a flat index ≥ 0.
//
// The 8-corner difference factors into three commuting shifts — along x
// (restarting at x = 0 and at e = 0), along y (stride nx, restarting at
// y = 0 and where e < nx), along z (stride ny·nx, where e < ny·nx) — so the
// encoder applies three differences and the decoder three prefix sums,
// in place, in any order. This is a plain scalar implementation: flat
// tiles exist for narrow grids whose box tiles are mostly clipped.

// flatRun is the geometry of one flat tile.
type flatRun struct {
	first uint64 // flat index of element 0
	n     int    // values in the run, 1 … 4096
	x0    uint64 // x of element 0
	y0    uint64 // y of element 0
	nx    uint64 // folded row length
	ny    uint64 // folded rows per plane
	// Strides clamped to TileElems: e ≥ sy (e ≥ sz) says the neighbour
	// one row (one plane) back lies in the run.
	sy, sz int
}

// flatRun is the geometry of flat tile t.
func (l *layout) flatRun(t uint64) flatRun {
	first := t * TileElems
	return flatRun{
		first: first,
		n:     l.tileLen(t),
		x0:    first % l.nx,
		y0:    first / l.nx % l.ny,
		nx:    l.nx,
		ny:    l.ny,
		sy:    int(min(l.nx, TileElems)),
		sz:    int(min(l.ny*l.nx, TileElems)),
	}
}

// rows calls fn for each row segment of the run, in increasing order:
// elements [start, end) share y (and z), start is x = 0 or element 0, and
// ypos says y ≥ 1.
func (f *flatRun) rows(fn func(start, end int, ypos bool)) {
	x, y := f.x0, f.y0
	for s := 0; s < f.n; {
		l := int(min(uint64(f.n-s), f.nx-x))
		fn(s, s+l, y >= 1)
		s += l
		x = 0
		if y++; y == f.ny {
			y = 0
		}
	}
}

// rowsBack is rows in decreasing order: the in-place differences read
// the segment before the one they change, which must not have changed yet.
func (f *flatRun) rowsBack(fn func(start, end int, ypos bool)) {
	last := f.first + uint64(f.n) - 1
	x, y := last%f.nx, last/f.nx%f.ny
	for end := f.n; end > 0; {
		start := 0
		if uint64(end-1) > x {
			start = end - 1 - int(x)
		}
		fn(start, end, y >= 1)
		end = start
		x = f.nx - 1
		if y == 0 {
			y = f.ny
		}
		y--
	}
}

// flatLorenzo turns q (the run's values, len n) into its residuals in
// place: d = Δz Δy Δx q with q = 0 for neighbours that do not exist. d[0]
// is q[0].
func flatLorenzo(q []int32, f *flatRun) {
	q = q[:f.n]
	for e := len(q) - 1; e >= f.sz; e-- {
		q[e] -= q[e-f.sz]
	}
	sy := f.sy
	f.rowsBack(func(start, end int, ypos bool) {
		if !ypos {
			return
		}
		for e := end - 1; e >= max(start, sy); e-- {
			q[e] -= q[e-sy]
		}
	})
	f.rows(func(start, end int, _ bool) {
		for e := end - 1; e > start; e-- {
			q[e] -= q[e-1]
		}
	})
}

// flatLorenzoInverse undoes flatLorenzo: prefix sums along x, then y,
// then z (int32, wrapping).
func flatLorenzoInverse(q []int32, f *flatRun) {
	q = q[:f.n]
	f.rows(func(start, end int, _ bool) {
		acc := q[start]
		for e := start + 1; e < end; e++ {
			acc += q[e]
			q[e] = acc
		}
	})
	sy := f.sy
	f.rows(func(start, end int, ypos bool) {
		if !ypos {
			return
		}
		for e := max(start, sy); e < end; e++ {
			q[e] += q[e-sy]
		}
	})
	for e := f.sz; e < len(q); e++ {
		q[e] += q[e-f.sz]
	}
}

// flatXor applies (inverse=false) or undoes (inverse=true) the masks'
// parity transform of a bitmap of the run's elements (bits ≥ n must be 0):
// flatLorenzo and flatLorenzoInverse with XOR for the sums, on the bits
// unpacked to bytes.
func flatXor(m *[planeBytes]byte, f *flatRun, inverse bool) {
	var b [TileElems]byte
	n, sy, sz := f.n, f.sy, f.sz
	for e := 0; e < n; e++ {
		b[e] = m[e>>3] >> (e & 7) & 1
	}
	if !inverse {
		for e := n - 1; e >= sz; e-- {
			b[e] ^= b[e-sz]
		}
		f.rowsBack(func(start, end int, ypos bool) {
			if !ypos {
				return
			}
			for e := end - 1; e >= max(start, sy); e-- {
				b[e] ^= b[e-sy]
			}
		})
		f.rows(func(start, end int, _ bool) {
			for e := end - 1; e > start; e-- {
				b[e] ^= b[e-1]
			}
		})
	} else {
		f.rows(func(start, end int, _ bool) {
			for e := start + 1; e < end; e++ {
				b[e] ^= b[e-1]
			}
		})
		f.rows(func(start, end int, ypos bool) {
			if !ypos {
				return
			}
			for e := max(start, sy); e < end; e++ {
				b[e] ^= b[e-sy]
			}
		})
		for e := sz; e < n; e++ {
			b[e] ^= b[e-sz]
		}
	}
	for i := range m[:(n+7)/8] {
		x := binary.LittleEndian.Uint64(b[8*i:])
		// Bit j of the result: the low bit of byte j.
		m[i] = byte((x & 0x0101010101010101) * 0x0102040810204080 >> 56)
	}
}

// flatTileCodes is tileCodes for flat tile t: quantize the run, fill the
// holes, take the residuals into s.flatD and their codes into s.lo and
// s.hi (slot e for element e; version 1's threshold and escape code).
func flatTileCodes[T float](s *tileScratch, st *tileStats, src []T, l *layout, t uint64, qz *quantizer) tileBits {
	f := l.flatRun(t)
	n := f.n
	q := s.q[:n]
	s.holes, s.fill, s.raw, s.rawVal, s.esc = s.holes[:0], s.fill[:0], s.raw[:0], s.rawVal[:0], s.esc[:0]
	next := 0
	if f.first+TileElems < l.n {
		next = TileElems
	}
	quantizeSpan(s, st, src, f.first, 0, 0, 1, 1, n, qz, next)
	st.outliers += uint64(len(s.raw))
	fillHoles(q, s.holes, 1, 1, n, 1, 1) // one plane: the mean q of the run

	d := s.flatD[:n]
	copy(d, q)
	flatLorenzo(d, &f)
	if n < TileElems {
		clear(s.lo[:])
		clear(s.hi[:])
	}
	orLo, orHi := residualCodes(s, d, maxCode, escapeCode)
	return tileBits{lz: 1, ly: 1, lx: n, smap: l.full, origin: d[0], orLo: orLo, orHi: orHi, flat: true, run: f}
}

// residualCodes writes the sign-magnitude code of every residual d[e],
// e ≥ 1, to slot e of s.lo and s.hi (slot 0 gets 0), escaping residuals
// whose magnitude exceeds maxMag (code esc, the residual to s.esc in
// element order). It returns the OR of the low and of the high bytes.
func residualCodes(s *tileScratch, d []int32, maxMag uint32, esc uint16) (orLo, orHi byte) {
	lo, hi := &s.lo, &s.hi
	s.esc = s.esc[:0]
	lo[0], hi[0] = 0, 0
	for e := 1; e < len(d); e++ {
		v := d[e]
		sg := v >> 31
		m := uint32((v ^ sg) - sg)
		if m > maxMag {
			s.esc = append(s.esc, v)
			lo[e], hi[e] = byte(esc), byte(esc>>8)
			orLo |= byte(esc)
			orHi |= byte(esc >> 8)
			continue
		}
		b0, b1 := byte(m), byte(m>>8)|byte(sg)&0x80
		lo[e], hi[e] = b0, b1
		orLo |= b0
		orHi |= b1
	}
	return orLo, orHi
}

// appendFlatMask is appendMask for a flat tile: the positions' bitmap,
// parity transformed with the run's neighbours, zero-block coded (slot e
// is element e).
func appendFlatMask(dst []byte, m *[planeBytes]byte, pos []int32, f *flatRun) []byte {
	clear(m[:])
	for _, p := range pos {
		m[p>>3] |= 1 << (p & 7)
	}
	flatXor(m, f, false)
	return appendZeroBlocks(dst, m[:], blocksPerPlane)
}

// flatMask reads a flat tile's zero-block coded mask into m (element
// order), rejecting bits at slots ≥ n, and undoes the parity transform.
func (r *reader) flatMask(m *[planeBytes]byte, f *flatRun, what string) error {
	if err := r.zeroBlocks(m[:], blocksPerPlane, what); err != nil {
		return err
	}
	if extra := stray(m, f.n); extra > 0 {
		return fmt.Errorf("%s marks %d slots outside the tile's values", what, extra)
	}
	flatXor(m, f, true)
	return nil
}

// stray counts the set bits of m at positions ≥ n.
func stray(m *[planeBytes]byte, n int) int {
	cnt := 0
	if n%8 != 0 {
		cnt += bits.OnesCount8(m[n/8] >> (n % 8))
	}
	rest := m[(n+7)/8:]
	for len(rest) >= 8 {
		cnt += bits.OnesCount64(binary.LittleEndian.Uint64(rest))
		rest = rest[8:]
	}
	for _, b := range rest {
		cnt += bits.OnesCount8(b)
	}
	return cnt
}
