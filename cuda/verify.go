package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fzsidecar/fzsidecar/fz"
)

// violations checks |x - x'| <= abs_eb for finite non-fill values and bit
// equality for the rest.
func violations(raw, out []byte, h *fz.Header) string {
	n := len(raw) / h.DType.Size()
	bad := 0
	first := ""
	for i := 0; i < n; i++ {
		var x, y float64
		var bx, by uint64
		if h.DType == fz.Float32 {
			bx, by = uint64(binary.LittleEndian.Uint32(raw[4*i:])), uint64(binary.LittleEndian.Uint32(out[4*i:]))
			x, y = float64(math.Float32frombits(uint32(bx))), float64(math.Float32frombits(uint32(by)))
		} else {
			bx, by = binary.LittleEndian.Uint64(raw[8*i:]), binary.LittleEndian.Uint64(out[8*i:])
			x, y = math.Float64frombits(bx), math.Float64frombits(by)
		}
		exact := math.IsNaN(x) || math.IsInf(x, 0) || (h.Fill != nil && bx == h.FillBits)
		if exact && bx != by || !exact && !(math.Abs(x-y) <= h.AbsEB) {
			if bad == 0 {
				first = fmt.Sprintf("value %d: %v came back as %v (eb %g)", i, x, y, h.AbsEB)
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Sprintf("%d bound violations; first: %s", bad, first)
	}
	return ""
}
