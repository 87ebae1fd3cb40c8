package cuda

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os/exec"
	"testing"
)

// TestCRC32CEmulated checks the device's chunk checksums (crc32c.cuh, as
// gather.cuh uses it) without a GPU: tools/crc_emu.cpp runs the same
// functions on the host, cutting each input into 256 parts as the kernel
// does (and into 1, 3 and 1000), and every result must equal Go's CRC32C —
// the checksum the format's chunk index holds and every reader verifies.
// Lengths cover empty chunks, fewer words than parts, and sizes that leave
// the last parts short or empty.
func TestCRC32CEmulated(t *testing.T) {
	emu := buildEmu(t, "crc_emu.cpp")
	r := rand.New(rand.NewPCG(31, 32))
	sizes := []int{0, 4, 8, 252, 256, 1020, 1024, 1028, 4096, 4 * 257, 4 * 1000, 4 * 1001, 65536 + 12, 262144, 1<<20 + 4}
	for range 40 {
		sizes = append(sizes, 4*r.IntN(1<<16))
	}
	var in bytes.Buffer
	var inputs [][]byte
	for i, n := range sizes {
		b := make([]byte, n)
		switch i % 3 {
		case 0: // random
			for j := range b {
				b[j] = byte(r.Uint32())
			}
		case 1: // mostly zero, as compressed tiles' planes are
			for j := 0; j < n; j += 1 + r.IntN(97) {
				b[j] = byte(r.Uint32())
			}
		case 2: // all ones
			for j := range b {
				b[j] = 0xFF
			}
		}
		inputs = append(inputs, b)
		in.Write(binary.LittleEndian.AppendUint64(nil, uint64(n)))
		in.Write(b)
	}
	cmd := exec.Command(emu)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crc_emu: %v\n%s", err, stderr.String())
	}
	if len(out) != 16*len(inputs) {
		t.Fatalf("crc_emu wrote %d bytes for %d inputs, want %d", len(out), len(inputs), 16*len(inputs))
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	for i, b := range inputs {
		want := crc32.Checksum(b, tab)
		for k, parts := range []int{256, 1, 3, 1000} {
			if got := binary.LittleEndian.Uint32(out[16*i+4*k:]); got != want {
				t.Errorf("%d bytes in %d parts: CRC32C %08x, want %08x", len(b), parts, got, want)
			}
		}
	}
}
