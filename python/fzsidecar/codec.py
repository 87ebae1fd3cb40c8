"""The FZ codec on numpy arrays: compress, decompress, inspect.

The decoded array is the buffer libfz decodes into (allocated by numpy, on a
64-byte boundary, or given as ``out``): no copy is made after decoding.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
from typing import Optional, Tuple, Union

import numpy as np

from . import _libfz as L

Buffer = Union[bytes, bytearray, memoryview, np.ndarray]

_dtypes = {L.F32: np.dtype("<f4"), L.F64: np.dtype("<f8")}
_codes = {np.dtype("<f4"): L.F32, np.dtype("<f8"): L.F64}
_modes = {"abs": L.ABS, "rel": L.REL}
_mode_names = {v: k for k, v in _modes.items()}


@dataclasses.dataclass(frozen=True)
class Info:
    """What an FZ container's header says (and, from a store, its catalog)."""

    dtype: np.dtype
    shape: Tuple[int, ...]  # slowest -> fastest (C order)
    mode: str  # "abs" or "rel"
    bound: float  # as given (absolute, or relative to the value range)
    abs_eb: float  # absolute bound every finite non-fill value meets
    fill: Optional[float]  # the fill value (NetCDF _FillValue), None if none
    range_min: float  # of the finite non-fill values (NaN if not computed)
    range_max: float
    raw_bytes: int
    compressed_bytes: int
    ratio: float  # raw_bytes / compressed_bytes
    chunks: int
    header_bytes: int
    version: int
    # Measured at compression; known for stored snapshots and fresh
    # compressions, None for bare bytes (the container does not record it).
    max_abs_err: Optional[float] = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _info(i: L.Info, max_abs_err: Optional[float] = None) -> Info:
    return Info(
        dtype=_dtypes[i.dtype],
        shape=tuple(int(d) for d in i.dims[: i.ndims]),
        mode=_mode_names[i.mode],
        bound=i.bound,
        abs_eb=i.abs_eb,
        fill=i.fill if i.has_fill else None,
        range_min=i.range_min,
        range_max=i.range_max,
        raw_bytes=i.raw_bytes,
        compressed_bytes=i.compressed_bytes,
        ratio=i.ratio,
        chunks=i.chunks,
        header_bytes=i.header_bytes,
        version=i.version,
        max_abs_err=max_abs_err,
    )


# Decode buffers start on a cache line: numpy's own allocations start 16 bytes
# past one, and the codec's AVX2 stores then straddle cache lines: decoding
# took 13% more CPU (docs/PYTHON.md, Performance).
ALIGN = 64


def empty(shape, dtype) -> np.ndarray:
    """np.empty(shape, dtype) whose data starts on a 64-byte boundary: the
    fastest array to decode into (decompress and Store.read allocate theirs
    this way). The memory is numpy's; the array is a view of one buffer."""
    dtype = np.dtype(dtype)
    n = math.prod(shape) * dtype.itemsize
    buf = np.empty(n + ALIGN, np.uint8)
    off = -buf.ctypes.data % ALIGN
    return buf[off:off + n].view(dtype).reshape(shape)


def _view(data: Buffer) -> np.ndarray:
    """A uint8 view of data's bytes, without copying."""
    if isinstance(data, np.ndarray):
        if not data.flags.c_contiguous:
            raise ValueError("the container bytes must be contiguous")
        return data.reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError) as e:
        raise TypeError(f"expected the container as bytes, bytearray, memoryview or a numpy array, got {type(data).__name__}: {e}") from None


# Container versions compress writes (docs/FORMAT.md): 1 is the default; 2
# ("group rates") is smaller and opt-in. decompress reads every version.
FORMAT_VERSIONS = (1, 2)
DEFAULT_FORMAT_VERSION = 1


def check_format_version(format_version) -> int:
    """format_version as an int, or ValueError/TypeError saying what is accepted."""
    if isinstance(format_version, bool) or not isinstance(format_version, (int, np.integer)):
        raise TypeError(f"format_version={format_version!r}: expected 1 (the default) or 2")
    if int(format_version) not in FORMAT_VERSIONS:
        raise ValueError(f"format_version={format_version!r}: expected 1 (the default) or 2")
    return int(format_version)


def _options(workers: int = 0, max_raw_bytes: int = 0, format_version: int = 0) -> L.Options:
    if workers < 0:
        raise ValueError(f"workers={workers}: expected >= 0 (0: all cores)")
    return L.Options(ctypes.sizeof(L.Options), workers, 0, format_version, max_raw_bytes)


def _region(region, n0: int) -> Tuple[int, int]:
    """(lo, hi) from a (lo, hi) pair or a slice with step 1 over dimension 0."""
    if isinstance(region, slice):
        if region.step not in (None, 1):
            raise ValueError(f"region {region}: only a step of 1 is supported")
        lo, hi, _ = region.indices(n0)
    else:
        try:
            lo, hi = (int(v) for v in region)
        except (TypeError, ValueError):
            raise TypeError(f"region {region!r}: expected (lo, hi) or slice(lo, hi) over the slowest dimension") from None
    if not 0 <= lo < hi <= n0:
        raise ValueError(f"region {lo}:{hi} is not inside dimension 0 (0:{n0}): expected 0 <= lo < hi <= {n0}")
    return lo, hi


def compress(array, eb: float, mode: str = "abs", fill: Optional[float] = None, *, workers: int = 0,
             stats: bool = False, format_version: int = DEFAULT_FORMAT_VERSION):
    """Compress a float32 or float64 array (any shape of 1 to 16 dims).

    eb is the error bound: absolute (mode="abs") or relative to the value
    range (mode="rel"). Elements equal to fill (compared in the array's dtype,
    as NetCDF's _FillValue) round-trip exactly and are left out of the range.
    format_version is the container version written: 1 (the default) or 2
    (smaller; opt-in, readable by fzsidecar builds with version-2 support).
    The bytes equal ``fzsidecar compress`` with the same parameters.

    Returns the container as bytes; with stats=True, (bytes, Info) where
    Info also carries the measured max_abs_err.
    """
    a = np.asarray(array)
    if a.dtype.kind != "f" or a.dtype.itemsize not in (4, 8):
        raise TypeError(f"dtype {a.dtype}: expected float32 or float64 (convert with .astype(np.float32))")
    if a.ndim < 1 or a.ndim > L.MAX_DIMS:
        raise ValueError(f"array has {a.ndim} dims: expected 1 to {L.MAX_DIMS}")
    if mode not in _modes:
        raise ValueError(f"mode {mode!r}: expected 'abs' or 'rel'")
    format_version = check_format_version(format_version)
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    dims = (ctypes.c_uint64 * a.ndim)(*a.shape)
    fillp = ctypes.byref(ctypes.c_double(float(fill))) if fill is not None else None
    out, n, st = ctypes.c_void_p(), ctypes.c_uint64(), L.Stats()
    opts = _options(workers, format_version=format_version)
    L.check(L.lib().fz_compress(a.ctypes.data, a.nbytes, _codes[a.dtype], dims, a.ndim, _modes[mode], float(eb),
                                fillp, ctypes.byref(opts), ctypes.byref(out), ctypes.byref(n), ctypes.byref(st)))
    blob = L.take_bytes(out, n.value)
    if not stats:
        return blob
    return blob, inspect(blob, _max_abs_err=st.max_abs_err)


def inspect(data: Buffer, *, _max_abs_err: Optional[float] = None) -> Info:
    """The header of a container (data may be just its first header_bytes)."""
    b = _view(data)
    i = L.Info()
    L.check(L.lib().fz_read_header(b.ctypes.data, b.nbytes, ctypes.byref(i)))
    return _info(i, _max_abs_err)


def decompress(data: Buffer, *, region=None, out: Optional[np.ndarray] = None, workers: int = 0,
               max_raw_bytes: int = 0) -> np.ndarray:
    """Decode a container into an ndarray of its dtype and shape.

    region: (lo, hi) or slice(lo, hi) of the slowest dimension: only the
    chunks holding it are decoded. out: a C-contiguous, writable array of
    the right dtype and shape to decode into (else one is allocated).
    max_raw_bytes: refuse containers that would decode to more (a guard for
    untrusted input). Corrupt input raises FzFormatError with libfz's message.
    """
    b = _view(data)
    info = inspect(b)
    shape = info.shape
    if region is not None:
        lo, hi = _region(region, shape[0])
        shape = (hi - lo,) + shape[1:]
    if out is None:
        out = empty(shape, info.dtype)
    else:
        if out.dtype != info.dtype or out.shape != shape:
            raise ValueError(f"out is {out.dtype} {out.shape}, the data is {info.dtype} {shape}")
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("out must be C-contiguous and writable")
    lib = L.lib()
    if region is None:
        opts = _options(workers, max_raw_bytes)
        L.check(lib.fz_decompress(b.ctypes.data, b.nbytes, out.ctypes.data, out.nbytes, ctypes.byref(opts), None))
    else:
        if max_raw_bytes and out.nbytes > max_raw_bytes:
            raise ValueError(f"region decodes to {out.nbytes} bytes, more than max_raw_bytes {max_raw_bytes}")
        L.check(lib.fz_decompress_region(b.ctypes.data, b.nbytes, lo, hi, out.ctypes.data, out.nbytes))
    return out
