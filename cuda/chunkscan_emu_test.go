package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestChunkScanEmulated checks the GPU decoder's chunk scan
// (chunk_scan.cuh: the first kernel of a decode, which turns each chunk's
// tile table into the offsets and sizes every later kernel reads tiles by)
// without a GPU: tools/chunk_scan_emu.cpp runs chunk_scan_kernel on the host,
// a block of 512 threads at a time, over CPU containers (versions 1 and 2,
// ranks 1-3, 1 and 4 tiles per chunk, jobs of 1-3 chunks) and copies of them
// whose tile tables and index entries are damaged: sizes made odd, small,
// huge or moved between tiles, chunk offsets and sizes off by 1-4 bytes, a
// byte inserted after chunk 0 with the index rewritten (so later chunks
// start misaligned). FORMAT.md's rule for a chunk decides what it must do:
// a chunk whose entry lies in the container, starts 4-byte aligned, holds
// its table, and whose tile sizes are each a multiple of 4 and at least 8
// and add up to the rest of the chunk is accepted whole, at exactly the
// offsets the table gives, and reports nothing; any other chunk reports an
// error in its job. Whatever it accepts lies 4-byte aligned inside its
// chunk and the container, no two tiles overlap.
func TestChunkScanEmulated(t *testing.T) {
	emu := buildEmu(t, "chunk_scan_emu.cpp", "-pthread")
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 12))
	le := binary.LittleEndian

	type rec struct {
		name    string
		blob    []byte
		idx     uint64 // index offset
		per     uint64 // tiles per chunk
		tiles   uint64
		chunks  uint64
		perJob  uint64
		entries [][2]uint64 // the index's (offset, size) per chunk, as the kernel reads them
	}
	var recs []rec
	add := func(name string, blob []byte, h *fz.Header, g fz.Geometry, perJob uint64) {
		e := make([][2]uint64, len(h.Chunks))
		io := h.IndexOffset()
		for c := range e {
			e[c] = [2]uint64{le.Uint64(blob[io+uint64(24*c):]), le.Uint64(blob[io+uint64(24*c)+8:])}
		}
		recs = append(recs, rec{name, blob, io, g.TilesPerChunk, g.Tiles, uint64(len(h.Chunks)), perJob, e})
	}
	for _, dims := range [][]uint64{{9000}, {70, 100}, {16, 32, 128}, {12, 33, 49}} {
		n, _ := fz.NumElements(dims)
		v := noisyField[float32](r, int(n))
		for _, version := range []int{1, 2} {
			for _, per := range []int{1, 4} {
				blob, _, err := fz.Compress(ctx, f32bytes(v), fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3},
					fz.WithTilesPerChunk(per), fz.WithFormatVersion(version))
				if err != nil {
					t.Fatal(err)
				}
				oc := openContainer(t, blob)
				h, g := oc.h, oc.g
				base := fmt.Sprintf("%v v%d per %d", dims, version, per)
				perJob := uint64(1 + r.IntN(3))
				add(base+" intact", blob, h, g, perJob)
				// one case of each kind a container (512 host threads a block
				// under ASan: kept short, as CI runs other packages beside it)
				for k := 0; k < 6; k++ {
					m := append([]byte(nil), blob...)
					c := r.IntN(len(h.Chunks))
					ch := h.Chunks[c]
					first, end := g.ChunkTiles(uint64(c))
					i := uint64(r.IntN(int(end - first)))
					at := ch.Offset + 4*i
					sz := le.Uint32(m[at:])
					var what string
					switch k % 6 {
					case 0:
						d := uint32(1 + r.IntN(3))
						le.PutUint32(m[at:], sz+d)
						what = fmt.Sprintf("tile %d size +%d", i, d)
					case 1:
						s := []uint32{0, 4, 7, 0xFFFFFFFC, 0xFFFFFFFF}[r.IntN(5)]
						le.PutUint32(m[at:], s)
						what = fmt.Sprintf("tile %d size %d", i, s)
					case 2:
						if end-first < 2 || i+1 >= end-first {
							i = 0
							at = ch.Offset
							sz = le.Uint32(m[at:])
						}
						if end-first >= 2 {
							le.PutUint32(m[at:], sz+4)
							le.PutUint32(m[at+4:], le.Uint32(m[at+4:])-4)
							what = fmt.Sprintf("tiles %d, %d: 4 bytes moved (a valid table)", i, i+1)
						} else {
							le.PutUint32(m[at:], sz-4)
							what = fmt.Sprintf("tile %d size -4", i)
						}
					case 3, 4:
						io := h.IndexOffset() + uint64(24*c)
						field := uint64(8 * r.IntN(2)) // offset or size
						d := []int64{-4, -1, 1, 2, 4}[r.IntN(5)]
						le.PutUint64(m[io+field:], uint64(int64(le.Uint64(m[io+field:]))+d))
						what = fmt.Sprintf("chunk %d index %s %+d", c, map[uint64]string{0: "offset", 8: "size"}[field], d)
					case 5:
						m = byteAfterChunk0(h, blob)
						what = "a byte inserted after chunk 0"
					}
					add(fmt.Sprintf("%s: %s", base, what), m, h, g, perJob)
				}
			}
		}
	}

	var in bytes.Buffer
	for _, x := range recs {
		in.Write(le.AppendUint64(nil, uint64(len(x.blob))))
		in.Write(x.blob)
		for _, v := range []uint64{x.idx, x.per, x.tiles, x.chunks, x.perJob} {
			in.Write(le.AppendUint64(nil, v))
		}
	}
	out := runEmu(t, emu, in.Bytes())

	at := 0
	next := func(n int) []byte {
		if at+n > len(out) {
			t.Fatalf("chunk_scan_emu wrote %d bytes, fewer than the records need", len(out))
		}
		b := out[at : at+n]
		at += n
		return b
	}
	accepted, rejectedChunks, validChunks := 0, 0, 0
	for _, x := range recs {
		blen := uint64(len(x.blob))
		for c0 := uint64(0); c0 < x.chunks; c0 += x.perJob {
			nc := min(x.perJob, x.chunks-c0)
			tile0 := c0 * x.per
			nt := min(nc*x.per, x.tiles-tile0)
			offs := make([]uint64, nt)
			sizes := make([]uint32, nt)
			for i := range offs {
				b := next(12)
				offs[i], sizes[i] = le.Uint64(b), le.Uint32(b[8:])
			}
			errWord := le.Uint64(next(8))
			var spans [][2]uint64
			anyInvalid := false
			invalid := map[uint64]bool{}
			for c := c0; c < c0+nc; c++ {
				first := c * x.per
				end := min(first+x.per, x.tiles)
				k := end - first
				coff, csz := x.entries[c][0], x.entries[c][1]
				inBlob := coff <= blen && csz <= blen-coff && csz >= 4*k
				ok := inBlob && coff%4 == 0
				// the table's sizes and the offsets they give (where the table is in the container)
				var tsz, tpos []uint64
				if inBlob {
					pos := coff + 4*k
					for i := uint64(0); i < k; i++ {
						s := uint64(le.Uint32(x.blob[coff+4*i:]))
						tsz, tpos = append(tsz, s), append(tpos, pos)
						ok = ok && s >= 8 && s%4 == 0 && pos+s <= coff+csz
						pos += s
					}
					ok = ok && pos == coff+csz
				}
				for i := first; i < end; i++ {
					o, s := offs[i-tile0], uint64(sizes[i-tile0])
					if ok && (s == 0 || o != tpos[i-first] || s != tsz[i-first]) {
						t.Fatalf("%s: chunk %d is valid but tile %d got offset %d size %d (want offset %d size %d)", x.name, c, i, o, s, tpos[i-first], tsz[i-first])
					}
					if s != 0 {
						if !inBlob || o != tpos[i-first] || s != tsz[i-first] || s < 8 || s%4 != 0 || o%4 != 0 || o+s > coff+csz {
							t.Fatalf("%s: chunk %d (offset %d, %d bytes): tile %d accepted at offset %d, %d bytes: not its table's entry, not a valid size, misaligned or outside its chunk", x.name, c, coff, csz, i, o, s)
						}
						spans = append(spans, [2]uint64{o, o + s})
						accepted++
					}
				}
				if ok {
					validChunks++
				} else {
					rejectedChunks++
					anyInvalid = true
					invalid[c] = true
				}
			}
			for a := range spans {
				for b := a + 1; b < len(spans); b++ {
					if spans[a][0] < spans[b][1] && spans[b][0] < spans[a][1] {
						t.Fatalf("%s: accepted tiles overlap (%v, %v)", x.name, spans[a], spans[b])
					}
				}
			}
			if !anyInvalid && errWord != ^uint64(0) {
				t.Fatalf("%s: every chunk of the job is valid, but the kernel reported tile %d code %d", x.name, tile0+errWord>>8, errWord&255)
			}
			if anyInvalid {
				if errWord == ^uint64(0) {
					t.Fatalf("%s: a chunk of job %d is invalid and the kernel reported nothing", x.name, c0/x.perJob)
				}
				if c := (tile0 + errWord>>8) / x.per; !invalid[c] {
					t.Fatalf("%s: error (code %d) reported in chunk %d, which is valid", x.name, errWord&255, c)
				}
			}
		}
	}
	if at != len(out) {
		t.Fatalf("chunk_scan_emu wrote %d bytes, the records need %d", len(out), at)
	}
	t.Logf("%d containers: %d chunks valid, %d invalid; %d tiles accepted", len(recs), validChunks, rejectedChunks, accepted)
	if rejectedChunks == 0 || validChunks == 0 {
		t.Fatal("the cases did not reach both kinds of chunk")
	}
}
