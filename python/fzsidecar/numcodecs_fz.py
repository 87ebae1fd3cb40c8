"""FZ as a numcodecs codec, for Zarr arrays and xarray's ``to_zarr``.

    import zarr
    from fzsidecar.numcodecs_fz import FZ
    z = zarr.array(data, chunks=(10, 64, 128), compressor=FZ(eb=1e-3, mode="rel"))

The codec id is ``"fzsidecar"``. Importing this module registers it with
numcodecs; the package also declares it under the ``numcodecs.codecs`` entry
point, so a Zarr store written with it opens in a fresh process without
importing fzsidecar first (``numcodecs.get_codec({"id": "fzsidecar", ...})``).

Each chunk becomes one FZ container (docs/FORMAT.md): the same bytes as
``fzsidecar.codec.compress`` and ``fzsidecar compress`` give for the chunk's
values, so its header records dtype, shape and bound. With ``mode="rel"`` the
range is the chunk's (see docs/FORMATS.md for what that means for edge chunks).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from numcodecs.registry import register_codec

from .codec import DEFAULT_FORMAT_VERSION, check_format_version, compress, decompress

CODEC_ID = "fzsidecar"


class FZ(Codec):
    """Error-bounded lossy compression of float32/float64 chunks with FZ.

    eb    the error bound: every finite non-fill value comes back within eb
          (mode="abs") or within eb x (max - min) of the chunk's finite
          non-fill values (mode="rel"); NaN, +-Inf and fill come back exact.
    mode  "abs" (default) or "rel".
    fill  a missing-value marker (Zarr's fill_value, NetCDF's _FillValue):
          values equal to it come back exactly and do not stretch the range.
    format_version
          the container version each chunk is written in: 1 (default) or 2
          (smaller; opt-in: decoding needs an fzsidecar with version-2
          support). Decoding reads either, whatever this says.
    """

    codec_id = CODEC_ID

    def __init__(self, eb: float, mode: str = "abs", fill: Optional[float] = None,
                 format_version: int = DEFAULT_FORMAT_VERSION):
        try:
            eb = float(eb)
        except (TypeError, ValueError):
            raise TypeError(f"eb={eb!r}: expected a number > 0") from None
        if not (eb > 0) or math.isinf(eb):
            raise ValueError(f"eb={eb}: expected a finite number > 0")
        if mode not in ("abs", "rel"):
            raise ValueError(f"mode={mode!r}: expected 'abs' or 'rel'")
        if fill is not None:
            try:
                fill = float(fill)
            except (TypeError, ValueError):
                raise TypeError(f"fill={fill!r}: expected a number or None") from None
        self.eb = eb
        self.mode = mode
        self.fill = fill
        self.format_version = check_format_version(format_version)

    def encode(self, buf):
        a = np.asarray(buf) if isinstance(buf, np.ndarray) else ensure_contiguous_ndarray(buf)
        if a.dtype.kind != "f" or a.dtype.itemsize not in (4, 8):
            raise TypeError(f"FZ codec: dtype {a.dtype}: expected float32 or float64 chunks")
        if a.dtype.byteorder == ">":
            # The container holds little-endian values and zarr views the
            # decoded bytes as the array's dtype: a big-endian array would
            # read back byte-swapped.
            raise TypeError(f"FZ codec: big-endian dtype {a.dtype.str}: store the array as little-endian "
                            f"('{a.dtype.newbyteorder('<').str}'; xarray: encoding dtype)")
        if a.ndim == 0:
            a = a.reshape(1)
        # An F-ordered chunk (zarr order="F") is compressed in its memory
        # order, as the transposed C array: the bytes then decode straight
        # back into memory order, which is what zarr reshapes with order="F".
        if a.flags.f_contiguous and not a.flags.c_contiguous:
            a = a.T
        return compress(a, self.eb, mode=self.mode, fill=self.fill, format_version=self.format_version)

    def decode(self, buf, out=None):
        data = buf if isinstance(buf, (bytes, bytearray, memoryview, np.ndarray)) else ensure_contiguous_ndarray(buf)
        dec = decompress(data)
        if out is None:
            return dec
        if isinstance(out, np.ndarray) and out.dtype.kind == "f":
            if out.size != dec.size:
                raise ValueError(f"FZ codec: the chunk decodes to {dec.size} values, the destination holds {out.size}")
            # Values, not bytes: out may be big-endian (zarr dtype ">f4").
            dst = out if out.flags.c_contiguous or not out.flags.f_contiguous else out.T
            if np.dtype(dst.dtype).newbyteorder("<") != dec.dtype:
                raise ValueError(f"FZ codec: the chunk holds {dec.dtype} values, the destination is {dst.dtype}")
            np.copyto(dst, dec.reshape(dst.shape), casting="equiv")
            return out
        return ndarray_copy(dec, out)

    def get_config(self):
        config = {"id": self.codec_id, "eb": self.eb, "mode": self.mode, "fill": self.fill}
        if self.format_version != DEFAULT_FORMAT_VERSION:
            # Only when set: the configs of existing arrays (and of arrays
            # written at the default) stay what older releases wrote.
            config["format_version"] = self.format_version
        return config

    def __repr__(self):
        fill = "" if self.fill is None else f", fill={self.fill!r}"
        fv = "" if self.format_version == DEFAULT_FORMAT_VERSION else f", format_version={self.format_version!r}"
        return f"FZ(eb={self.eb!r}, mode={self.mode!r}{fill}{fv})"


register_codec(FZ)
