"""Read snapshots that ``fzsidecar serve`` stored (docs/SINKS.md layout).

    with fzsidecar.open_store("./fzdata") as s:      # or "s3://bucket/prefix"
        s.runs(); s.variables(run); s.steps(run, var)
        a = s.read(run, "temp", "latest")              # numpy array
        a, info = s.read(run, "temp", 3, region=(0, 8), with_info=True)

S3 endpoint and credentials come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_REGION, as for the CLI's --sink.
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import json
import threading
from typing import List, Optional, Union

import numpy as np

from . import _libfz as L
from .codec import Info, _info, _region, empty

Step = Union[int, str]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One stored snapshot: its key, header and catalog record."""

    run: str
    var: str
    step: int
    info: Info  # header (bound, mode, fill, ratio, ...) plus max_abs_err
    stored_bytes: int
    crc32c: int
    created: Optional[datetime.datetime]


def _cstr(s: str, what: str) -> bytes:
    if not isinstance(s, str):
        raise TypeError(f"{what} must be a str, got {type(s).__name__}")
    return s.encode("utf-8")


class Store:
    """An open store; safe to share between threads. Use open_store()."""

    def __init__(self, url: str):
        self.url = str(url)
        h = ctypes.c_uint64()
        L.check(L.lib().fz_store_open(_cstr(self.url, "url"), ctypes.byref(h)))
        self._h = h.value
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<fzsidecar.Store {self.url!r}{'' if self._h else ' (closed)'}>"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        with self._lock:
            h, self._h = self._h, 0
        if h:
            L.check(L.lib().fz_store_close(h))

    def _handle(self) -> int:
        if not self._h:
            raise ValueError(f"store {self.url} is closed")
        return self._h

    # ---- listings ----

    def _names(self, fn, *args) -> List[str]:
        p, n = ctypes.c_void_p(), ctypes.c_uint64()
        L.check(fn(self._handle(), *args, ctypes.byref(p), ctypes.byref(n)))
        s = L.take_bytes(p, len(ctypes.string_at(p))).decode()
        return s.split("\n") if n.value else []

    def runs(self) -> List[str]:
        """The runs in the store, sorted."""
        return self._names(L.lib().fz_store_runs)

    def variables(self, run: str) -> List[str]:
        """The variables of run, sorted (FzNotFoundError if no such run)."""
        return self._names(L.lib().fz_store_vars, _cstr(run, "run"))

    def steps(self, run: str, var: str) -> List[int]:
        """The steps stored for run/var, increasing."""
        p, n = ctypes.c_void_p(), ctypes.c_uint64()
        L.check(L.lib().fz_store_steps(self._handle(), _cstr(run, "run"), _cstr(var, "var"), ctypes.byref(p),
                                       ctypes.byref(n)))
        try:
            return [int(v) for v in np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_uint64)), (n.value,))] if n.value else []
        finally:
            L.lib().fz_free(p)

    def list(self, run: Optional[str] = None, var: Optional[str] = None) -> List[dict]:
        """The catalog (all, one run, or one run's variable) as dicts with
        run, var, step, dtype, dims, mode, bound, abs_eb, max_abs_err,
        raw_bytes, stored_bytes, crc32c, created, ratio."""
        p = ctypes.c_void_p()
        L.check(L.lib().fz_store_list_json(self._handle(), None if run is None else _cstr(run, "run"),
                                           None if var is None else _cstr(var, "var"), ctypes.byref(p)))
        return json.loads(L.take_bytes(p, len(ctypes.string_at(p))))

    def latest(self, run: str, var: str) -> int:
        """The newest step of run/var."""
        s = self.steps(run, var)
        return s[-1]

    def _step(self, run: str, var: str, step: Step) -> int:
        if isinstance(step, str):
            if step.strip().lower() == "latest":
                return self.latest(run, var)
            try:
                return int(step)
            except ValueError:
                raise ValueError(f"step {step!r}: expected a number or 'latest'") from None
        if isinstance(step, (bool, float)) or int(step) < 0:
            raise ValueError(f"step {step!r}: expected a non-negative integer or 'latest'")
        return int(step)

    # ---- reads ----

    def stat(self, run: str, var: str, step: Step = "latest") -> Entry:
        """Header and catalog record of one snapshot, without its data."""
        st = self._step(run, var, step)
        e = L.Entry()
        L.check(L.lib().fz_store_stat(self._handle(), _cstr(run, "run"), _cstr(var, "var"), st, ctypes.byref(e)))
        return self._entry(run, var, st, e)

    @staticmethod
    def _entry(run: str, var: str, step: int, e: L.Entry) -> Entry:
        created = None
        if e.created_unix_ns:
            created = datetime.datetime.fromtimestamp(e.created_unix_ns / 1e9, tz=datetime.timezone.utc)
        mae = e.max_abs_err if e.max_abs_err else None
        return Entry(run, var, step, _info(e.info, mae), e.stored_bytes, e.crc32c, created)

    def read(self, run: str, var: str, step: Step = "latest", region=None, *, out: Optional[np.ndarray] = None,
             with_info: bool = False):
        """Read and decode one snapshot (or region=(lo, hi) / slice of its
        slowest dimension, fetching only the chunks that hold it).

        Returns the ndarray, or (ndarray, Entry) with with_info=True. The
        array is the buffer libfz decodes into; out may give it.
        """
        st = self._step(run, var, step)
        if out is None:
            i = self.stat(run, var, st).info
            shape = i.shape
            if region is not None:
                lo, hi = _region(region, shape[0])
                shape = (hi - lo,) + shape[1:]
            out = empty(shape, i.dtype)
        e = self.read_into(out, run, var, st, region)
        return (out, e) if with_info else out

    def read_into(self, out: np.ndarray, run: str, var: str, step: Step = "latest", region=None) -> Entry:
        """Decode one snapshot (or a region of it) into out, a C-contiguous
        writable array of its dtype and shape, without fetching the header
        first (one request less per read on S3). Returns the Entry."""
        st = self._step(run, var, step)
        if not isinstance(out, np.ndarray) or not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("out must be a C-contiguous writable numpy array")
        e = L.Entry()
        r, v = _cstr(run, "run"), _cstr(var, "var")
        if region is None:
            L.check(L.lib().fz_store_read(self._handle(), r, v, st, out.ctypes.data, out.nbytes, ctypes.byref(e)))
        else:
            if isinstance(region, slice):
                if region.start is None or region.stop is None or region.step not in (None, 1):
                    raise ValueError(f"region {region}: give slice(lo, hi) with both ends here")
                lo, hi = region.start, region.stop
            else:
                lo, hi = (int(x) for x in region)
            if lo < 0 or hi < lo:
                raise ValueError(f"region {lo}:{hi}: expected 0 <= lo < hi")
            L.check(L.lib().fz_store_read_region(self._handle(), r, v, st, lo, hi, out.ctypes.data, out.nbytes,
                                                 ctypes.byref(e)))
        got = _info(e.info)
        want = (got.shape if region is None else (hi - lo,) + got.shape[1:])
        if out.dtype != got.dtype or out.shape != want:
            # libfz checked the byte size; the dtype and shape are ours to check.
            raise ValueError(f"out is {out.dtype} {out.shape}, {run}/{var}/{st} is {got.dtype} {want}")
        return self._entry(run, var, st, e)


def open_store(url: str) -> Store:
    """Open a store: a directory, file:///path, or s3://bucket/prefix."""
    return Store(url)
