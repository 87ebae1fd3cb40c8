package main

import (
	"flag"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/fz"
)

// formatVersionFlag registers --format-version, the container version a
// command writes. It accepts what serve's format_version accepts
// (config.ParseFormatVersion), so a bad value is refused while the flags
// are parsed, with the accepted versions in the message.
func formatVersionFlag(fs *flag.FlagSet) *int {
	v := 1
	fs.Func("format-version", "container format `version` to write: "+config.FormatVersions+
		" (2: smaller files, opt-in; readers need a build that lists v2 in 'fzsidecar version'; docs/FORMAT.md) (default 1)",
		func(s string) error {
			n, err := config.ParseFormatVersion(s)
			if err != nil {
				return err
			}
			v = n
			return nil
		})
	return &v
}

// tilingFlag registers --tiling, the tile geometry a command writes. It
// accepts what serve's tiling accepts (config.ParseTiling), so a bad value
// is refused while the flags are parsed.
func tilingFlag(fs *flag.FlagSet) *fz.Tiling {
	t := fz.TilingBoxes
	fs.Func("tiling", "tile `geometry` to write: "+config.Tilings+
		" (flat: runs of 4096 consecutive values, for narrow grids whose box tiles are mostly clipped; padded: clipped box tiles coded whole, for GPU speed on f32 rank-3 fields; auto picks per field: flat for those grids, else padded for an f32 rank-3 field with a clipped tile and sub-block growth ≤ 1.05, else boxes; docs/FORMAT.md §3.1, §3.2) (default boxes)",
		func(s string) error {
			v, err := config.ParseTiling(s)
			if err != nil {
				return err
			}
			t, err = fz.ParseTiling(v)
			return err
		})
	return &t
}
