"""h5py arguments for the FZ HDF5 filter (the plugin in hdf5/, filter id 310).

    import h5py
    from fzsidecar.hdf5filter import FZ
    f.create_dataset("t", data=x, chunks=(10, 64, 128), **FZ(1e-3, mode="rel"))

HDF5 must find the plugin: set HDF5_PLUGIN_PATH to the directory holding
libh5zfz.so (build/hdf5-plugins after `make hdf5`) before h5py is imported.
The cd_values layout is docs/FORMATS.md §2; this module only packs it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Tuple, Union

FILTER_ID = 310
_MODES = {"abs": 1, "rel": 2}


def _words(v: float) -> Tuple[int, int]:
    lo, hi = struct.unpack("<II", struct.pack("<d", v))
    return lo, hi


def cd_values(eb: float, mode: str = "abs", fill: Union[None, float, str] = None,
              format_version: int = 1) -> Tuple[int, ...]:
    """The user part of cd_values: (mode, bound low, bound high, has_fill, fill low, fill high),
    plus the format version when it is not 1.

    fill: None (no fill value), a number, or "dataset" (the dataset's own fill
    value, e.g. NetCDF's _FillValue; HDF5 pads edge chunks with it).
    format_version: the container version chunks are written in: 1 (the
    default: the 6 values every plugin knows) or 2 (smaller; opt-in: reading
    needs a plugin and libfz with version-2 support).
    """
    if mode not in _MODES:
        raise ValueError(f"mode={mode!r}: expected 'abs' or 'rel'")
    eb = float(eb)
    if not (eb > 0) or math.isinf(eb):
        raise ValueError(f"eb={eb}: expected a finite number > 0")
    if fill is None:
        has, fv = 0, 0.0
    elif isinstance(fill, str):
        if fill != "dataset":
            raise ValueError(f"fill={fill!r}: expected None, a number or 'dataset'")
        has, fv = 2, 0.0
    else:
        has, fv = 1, float(fill)
    if isinstance(format_version, bool) or format_version not in (1, 2):
        raise ValueError(f"format_version={format_version!r}: expected 1 (the default) or 2")
    out = (_MODES[mode], *_words(eb), has, *_words(fv))
    return out if format_version == 1 else out + (int(format_version),)


class FZ(Mapping):
    """``**FZ(eb, mode, fill, format_version)`` gives create_dataset its
    compression arguments (as hdf5plugin's filter classes do)."""

    filter_id = FILTER_ID

    def __init__(self, eb: float, mode: str = "abs", fill: Union[None, float, str] = None, format_version: int = 1):
        self._kw = {"compression": FILTER_ID, "compression_opts": cd_values(eb, mode, fill, format_version)}

    def __getitem__(self, k):
        return self._kw[k]

    def __iter__(self):
        return iter(self._kw)

    def __len__(self):
        return len(self._kw)

    def __repr__(self):
        return f"FZ({self._kw!r})"


def decode_cd_values(values) -> dict:
    """What a dataset's stored cd_values say (h5py: dset.id.get_create_plist().get_filter_by_id(310))."""
    v = [int(x) & 0xFFFFFFFF for x in values]
    if len(v) < 3:
        raise ValueError(f"{len(v)} cd_values: expected at least 3")
    out = {"mode": {1: "abs", 2: "rel"}.get(v[0], v[0]),
           "eb": struct.unpack("<d", struct.pack("<II", v[1], v[2]))[0], "fill": None}
    if len(v) >= 6 and v[3] == 1:
        out["fill"] = struct.unpack("<d", struct.pack("<II", v[4], v[5]))[0]
    elif len(v) >= 6 and v[3] == 2:
        out["fill"] = "dataset"
    out["format_version"] = 1
    if len(v) == 7:  # the user's form
        out["format_version"] = v[6] or 1
    if len(v) >= 9:
        out["layout"], out["dtype"] = v[6], {1: "float32", 2: "float64"}.get(v[7], v[7])
        out["chunks"] = tuple(v[9:9 + v[8]])
        if v[6] == 2 and len(v) == 10 + v[8]:
            out["format_version"] = v[9 + v[8]]
    return out


__all__ = ["FILTER_ID", "FZ", "cd_values", "decode_cd_values"]
