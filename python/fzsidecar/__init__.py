"""fzsidecar: FZ compressed scientific data from Python.

    import fzsidecar
    blob = fzsidecar.compress(a, eb=1e-3, mode="rel")       # bytes
    b = fzsidecar.decompress(blob)                           # ndarray
    fzsidecar.inspect(blob)                                  # Info
    s = fzsidecar.open_store("./fzdata")                     # or s3://bucket/prefix
    s.read("run1", "temp", "latest", region=(0, 8))

    import xarray as xr
    ds = xr.open_dataset("./fzdata/run1", engine="fzsidecar")

The codec and store run in libfz (the Go code as a C library): a copy already
loaded in the process, else $FZ_LIBFZ, the package's _lib/ directory, or the
repository's build/lib/.
Optional parts load on first use, so a missing library of one (e.g. the
producer's) never breaks the others: ``fzsidecar.producer``,
``fzsidecar.numcodecs_fz``, ``fzsidecar.hdf5filter``.
"""

from __future__ import annotations

import importlib

from ._libfz import (FzChecksumError, FzError, FzFormatError, FzInvalidError, FzNotFoundError,
                     FzStoreError)
from .codec import Info, compress, decompress, empty, inspect
from .store import Entry, Store, open_store

__version__ = "0.1.0"

__all__ = [
    "compress", "decompress", "inspect", "empty", "open_store", "Info", "Entry", "Store",
    "FzError", "FzFormatError", "FzChecksumError", "FzInvalidError", "FzNotFoundError", "FzStoreError",
]

# Submodules imported on first attribute access (PEP 562).
_lazy = ("producer", "numcodecs_fz", "hdf5filter", "xarray_backend")


def __getattr__(name):
    if name in _lazy:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
