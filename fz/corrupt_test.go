package fz

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func sampleContainer(t testing.TB) ([]float32, []byte) {
	v := make([]float32, 20*30*40)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)/30) * 50)
		if i%97 == 0 {
			v[i] = float32(math.NaN())
		}
		if i%131 == 0 {
			v[i] = -1e34
		}
	}
	v[5] = 1e30
	blob, _, err := Compress(context.Background(), asBytes(v), Params{DType: Float32, Dims: []uint64{20, 30, 40}, Mode: Rel, Bound: 1e-4, Fill: ptr(-1e34)}, WithTilesPerChunk(2))
	if err != nil {
		t.Fatal(err)
	}
	return v, blob
}

// fixCRCs recomputes every checksum so that a mutation reaches the parsers
// behind them.
func fixCRCs(b []byte) {
	if len(b) < headerFixed {
		return
	}
	nd := int(b[10])
	hs := fixedSize(nd)
	if nd < 1 || nd > MaxDims || len(b) < hs {
		return
	}
	binary.LittleEndian.PutUint32(b[hs-4:], crc32c(b[:hs-4]))
	nc := binary.LittleEndian.Uint64(b[80:])
	if nc > uint64(len(b))/indexEntry {
		return
	}
	ie := hs + int(nc)*indexEntry
	if ie+4 > len(b) {
		return
	}
	for i := 0; i < int(nc); i++ {
		e := b[hs+i*indexEntry:]
		off, sz := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		if off <= uint64(len(b)) && sz <= uint64(len(b))-off {
			binary.LittleEndian.PutUint32(e[16:], crc32c(b[off:off+sz]))
		}
	}
	binary.LittleEndian.PutUint32(b[ie:], crc32c(b[hs:ie]))
}

// flipsDetected flips n random bytes of blob, one at a time, and requires
// each flip to be an ErrFormat error.
func flipsDetected(t *testing.T, blob []byte, seed uint64, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(5, seed))
	for i := 0; i < n; i++ {
		b := append([]byte(nil), blob...)
		pos := r.IntN(len(b))
		b[pos] ^= byte(1 + r.IntN(255))
		if _, _, err := Decompress(context.Background(), b); err == nil {
			t.Fatalf("flip at byte %d of %d went undetected", pos, len(b))
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("flip at byte %d: error %v does not wrap ErrFormat", pos, err)
		}
	}
}

func TestCorruptionDetected(t *testing.T) {
	_, blob := sampleContainer(t)
	ctx := context.Background()
	flipsDetected(t, blob, 6, 2000)
	for _, n := range []int{0, 3, 50, 87, 200, len(blob) - 1} {
		if _, _, err := Decompress(ctx, blob[:n]); err == nil {
			t.Fatalf("truncation to %d bytes went undetected", n)
		}
	}
	b := append([]byte(nil), blob...)
	b[4] = 9
	if _, err := ReadHeader(b); err == nil || !contains(err.Error(), "unsupported format version 9") {
		t.Fatalf("unknown version: %v", err)
	}
}

// TestMutationsBehindChecksums mutates payloads and fixes the checksums,
// so the tile parser itself sees hostile bytes: it must return an error or
// decode something, never panic.
func TestMutationsBehindChecksums(t *testing.T) {
	_, blob := sampleContainer(t)
	decodeMutations(blob, 9)
}

// decodeMutations decodes 3000 copies of blob, each with 1-4 random bytes
// set and its checksums fixed (seeded by seed); a panic fails the test.
func decodeMutations(blob []byte, seed uint64) {
	r := rand.New(rand.NewPCG(8, seed))
	for i := 0; i < 3000; i++ {
		b := append([]byte(nil), blob...)
		for k := 0; k < 1+r.IntN(4); k++ {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		fixCRCs(b)
		Decompress(context.Background(), b) //nolint:errcheck // only panics matter
	}
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (func() bool {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
		return false
	})()
}

func FuzzReadHeader(f *testing.F) {
	_, blob := sampleContainer(f)
	f.Add(blob[:200])
	f.Add(blob)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadHeader(b)
		if err == nil && h.HeaderSize > uint64(len(b)) {
			t.Fatalf("header size %d beyond input %d", h.HeaderSize, len(b))
		}
	})
}

// FuzzDecompress feeds arbitrary bytes, with checksums fixed up so the
// fuzzer gets past them.
func FuzzDecompress(f *testing.F) {
	_, blob := sampleContainer(f)
	f.Add(blob, true)
	f.Add(blob[:300], false)
	small, _, _ := Compress(context.Background(), asBytes([]float64{1, 2, 3, math.Inf(1)}), Params{DType: Float64, Dims: []uint64{4}, Mode: Abs, Bound: 0.1})
	f.Add(small, true)
	f.Add(sampleContainerV2(f), true)
	small2, _, _ := Compress(context.Background(), asBytes([]float64{1, 2, 3, math.Inf(1)}), Params{DType: Float64, Dims: []uint64{4}, Mode: Abs, Bound: 0.1}, WithFormatVersion(2))
	f.Add(small2, true)
	_, flat1 := sampleFlat(f, 1)
	_, flat2 := sampleFlat(f, 2)
	f.Add(flat1, true)
	f.Add(flat2, true)
	smallFlat, _, _ := Compress(context.Background(), asBytes([]float32{1, 2, 3, 40, 5, 6, float32(math.Inf(1))}), Params{DType: Float32, Dims: []uint64{1, 7}, Mode: Abs, Bound: 0.1}, WithTiling(TilingFlat))
	f.Add(smallFlat, true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			fixCRCs(b)
		}
		h, out, err := Decompress(context.Background(), b, WithMaxRawSize(16<<20))
		if err == nil && uint64(len(out)) != h.RawSize() {
			t.Fatalf("decoded %d bytes, header says %d", len(out), h.RawSize())
		}
	})
}
