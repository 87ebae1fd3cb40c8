"""ctypes declarations of libfz's C ABI (libfz/fz.h) and its errors."""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, c_char_p, c_double, c_int, c_int32, c_int64, c_uint32, c_uint64, c_void_p

from . import _native

ABI_VERSION = 2
MAX_DIMS = 16

OK, EINVAL, EFORMAT, ECHECKSUM, ESIZE, ENOTFOUND, EIO, EINTERNAL = range(8)
F32, F64 = 1, 2
ABS, REL = 1, 2


class FzError(Exception):
    """An error from libfz; ``code`` is its fz_status, the message libfz's."""

    def __init__(self, message: str, code: int = EINTERNAL):
        super().__init__(message)
        self.code = code


class FzInvalidError(FzError, ValueError):
    """A bad argument: dtype, mode, bound, shape, region, name, buffer size."""


class FzFormatError(FzError, ValueError):
    """The bytes are not a valid FZ container (corrupt, truncated, wrong version)."""


class FzChecksumError(FzFormatError):
    """Stored bytes do not match their CRC32C."""


class FzNotFoundError(FzError, LookupError):
    """The run, variable or step is not in the store (the message lists what is)."""


class FzStoreError(FzError, OSError):
    """The store could not be read (disk, network, credentials)."""


_classes = {
    EINVAL: FzInvalidError,
    ESIZE: FzInvalidError,
    EFORMAT: FzFormatError,
    ECHECKSUM: FzChecksumError,
    ENOTFOUND: FzNotFoundError,
    EIO: FzStoreError,
}


class Options(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("workers", c_int32),
        ("tiles_per_chunk", c_uint32),
        ("format_version", c_uint32),
        ("max_raw_bytes", c_uint64),
    ]


class Info(ctypes.Structure):
    _fields_ = [
        ("dtype", c_int32),
        ("mode", c_int32),
        ("ndims", c_int32),
        ("has_fill", c_int32),
        ("dims", c_uint64 * MAX_DIMS),
        ("bound", c_double),
        ("abs_eb", c_double),
        ("fill", c_double),
        ("range_min", c_double),
        ("range_max", c_double),
        ("elements", c_uint64),
        ("raw_bytes", c_uint64),
        ("compressed_bytes", c_uint64),
        ("header_bytes", c_uint64),
        ("chunks", c_uint64),
        ("ratio", c_double),
        ("version", c_uint32),
        ("reserved", c_uint32),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("raw_bytes", c_uint64),
        ("compressed_bytes", c_uint64),
        ("abs_eb", c_double),
        ("max_abs_err", c_double),
        ("outliers", c_uint64),
        ("ratio", c_double),
    ]


class Entry(ctypes.Structure):
    _fields_ = [
        ("info", Info),
        ("max_abs_err", c_double),
        ("stored_bytes", c_uint64),
        ("crc32c", c_uint32),
        ("reserved", c_uint32),
        ("created_unix_ns", c_int64),
    ]


_P = POINTER
_protos = {
    "fz_last_error": (c_char_p, []),
    "fz_abi_version": (c_int, []),
    "fz_free": (None, [c_void_p]),
    "fz_compress": (c_int, [c_void_p, c_uint64, c_int32, _P(c_uint64), c_int32, c_int32, c_double,
                            _P(c_double), _P(Options), _P(c_void_p), _P(c_uint64), _P(Stats)]),
    "fz_read_header": (c_int, [c_void_p, c_uint64, _P(Info)]),
    "fz_decompressed_size": (c_int, [c_void_p, c_uint64, _P(c_uint64)]),
    "fz_decompress": (c_int, [c_void_p, c_uint64, c_void_p, c_uint64, _P(Options), _P(Info)]),
    "fz_decompress_region": (c_int, [c_void_p, c_uint64, c_uint64, c_uint64, c_void_p, c_uint64]),
    "fz_region_size": (c_int, [c_void_p, c_uint64, c_uint64, c_uint64, _P(c_uint64)]),
    "fz_store_open": (c_int, [c_char_p, _P(c_uint64)]),
    "fz_store_close": (c_int, [c_uint64]),
    "fz_store_runs": (c_int, [c_uint64, _P(c_void_p), _P(c_uint64)]),
    "fz_store_vars": (c_int, [c_uint64, c_char_p, _P(c_void_p), _P(c_uint64)]),
    "fz_store_steps": (c_int, [c_uint64, c_char_p, c_char_p, _P(c_void_p), _P(c_uint64)]),
    "fz_store_list_json": (c_int, [c_uint64, c_char_p, c_char_p, _P(c_void_p)]),
    "fz_store_stat": (c_int, [c_uint64, c_char_p, c_char_p, c_uint64, _P(Entry)]),
    "fz_store_read": (c_int, [c_uint64, c_char_p, c_char_p, c_uint64, c_void_p, c_uint64, _P(Entry)]),
    "fz_store_read_region": (c_int, [c_uint64, c_char_p, c_char_p, c_uint64, c_uint64, c_uint64,
                                     c_void_p, c_uint64, _P(Entry)]),
}

_lib = None
_lock = threading.Lock()


def lib() -> ctypes.CDLL:
    """The loaded libfz, its prototypes declared (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            l = _native.load("FZ_LIBFZ", "libfz.so", "libfz")
            for name, (res, args) in _protos.items():
                f = getattr(l, name)
                f.restype, f.argtypes = res, args
            v = l.fz_abi_version()
            if v != ABI_VERSION:
                raise OSError(f"libfz ABI version {v}, this package needs {ABI_VERSION}: rebuild with `make python`")
            _lib = l
    return _lib


def check(status: int) -> None:
    """Raise the FzError for a failed call (on the thread that made it)."""
    if status == OK:
        return
    msg = (lib().fz_last_error() or b"").decode("utf-8", "replace") or f"libfz error {status}"
    raise _classes.get(status, FzError)(msg, status)


def take_bytes(ptr: c_void_p, n: int) -> bytes:
    """Copy n bytes libfz malloc'd into a bytes object and free them."""
    try:
        return ctypes.string_at(ptr, n) if n else b""
    finally:
        lib().fz_free(ptr)
