"""Hand numpy fields to an fzsidecar from Python, written in place.

    from fzsidecar.producer import Producer

    with Producer(shm_dir="/dev/shm/fzsidecar") as p:       # url, credentials: see Producer
        snap = p.begin("run1", "temperature", step=10, shape=(64, 128), dtype="f4",
                       mode="rel", bound=1e-3)
        snap.array[...] = field           # a numpy view of the shared-memory segment
        snap.publish()                    # the array is read-only from here on
        res = snap.wait(timeout=60)       # Result(key=..., ratio=..., max_abs_err=...)

This is ctypes over libfzproducer, the C library of protocol v1
(docs/PROTOCOL.md, docs/PRODUCERS.md); it is found through $FZ_LIBFZPRODUCER,
the package's ``_lib/`` directory, or the repository's ``build/lib/`` (``make
producer``). numpy is the only Python dependency.

Errors raise :class:`ProducerError`; its ``code`` is the sidecar's error code
unchanged (``budget_full``, ``too_large``, ``conflict``, ``invalid``, …) or the
library's (``unavailable``, ``system``, ``timeout``, …), and ``status`` the C
status number.

Threading: calls on one Producer (and its snapshots) must not overlap; use one
Producer per thread or a lock. Two Producers in one process are independent.

Lifetime: an array from ``snap.array`` (and every view derived from it)
keeps its snapshot and the mapping alive. ``free()``, ``abort()`` and
``Producer.close()`` never unmap memory such an array can reach: while one
lives they take effect when the last is gone.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import threading
import weakref
from typing import Optional, Sequence

import numpy as np

from . import _native

__all__ = ["Producer", "Snapshot", "Result", "ProducerError", "library_version"]

# Status codes of fzproducer.h.
OK, EINVAL, ENOMEM, ESYS, ECONNECT, EUNAVAILABLE, EBUDGET, ESIDECAR, EPUBLISH, ETIMEOUT, ESTATE, ECLOSED = range(12)
_F32, _F64 = 1, 2
_ABS, _REL = 1, 2
_MAX_DIMS = 16


class ProducerError(Exception):
    """A libfzproducer call failed. ``code`` is the error code string (the
    sidecar's, unchanged, when it answered), ``status`` the C status."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{code}: {message}" if code else message)
        self.status = status
        self.code = code
        self.message = message


class _CResult(ctypes.Structure):
    _fields_ = [
        ("ok", ctypes.c_int32), ("reserved", ctypes.c_int32),
        ("step", ctypes.c_uint64), ("raw_bytes", ctypes.c_uint64), ("compressed_bytes", ctypes.c_uint64),
        ("ratio", ctypes.c_double), ("abs_eb", ctypes.c_double), ("max_abs_err", ctypes.c_double),
        ("seconds", ctypes.c_double),
        ("msg_id", ctypes.c_char * 160), ("key", ctypes.c_char * 512),
        ("error_code", ctypes.c_char * 64), ("error_message", ctypes.c_char * 1024),
    ]


@dataclasses.dataclass(frozen=True)
class Result:
    """What the sidecar reported for a stored snapshot."""
    key: str
    step: int
    raw_bytes: int
    compressed_bytes: int
    ratio: float
    abs_eb: float
    max_abs_err: float
    seconds: float
    msg_id: str


_lib = None
_lib_lock = threading.Lock()


def _load():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = _native.load("FZ_LIBFZPRODUCER", "libfzproducer.so", "producer")
        P, S = ctypes.c_void_p, ctypes.c_void_p
        sig = {
            "fzp_version": (ctypes.c_char_p, []),
            "fzp_new": (P, []),
            "fzp_set": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p]),
            "fzp_connect": (ctypes.c_int, [P]),
            "fzp_id": (ctypes.c_char_p, [P]),
            "fzp_errmsg": (ctypes.c_char_p, [P]),
            "fzp_errcode": (ctypes.c_char_p, [P]),
            "fzp_begin": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_uint64), ctypes.c_int, ctypes.c_double,
                                         ctypes.POINTER(ctypes.c_double), ctypes.POINTER(S),
                                         ctypes.POINTER(ctypes.c_void_p)]),
            "fzp_snapshot_msg_id": (ctypes.c_char_p, [S]),
            "fzp_snapshot_reused": (ctypes.c_int, [S]),
            "fzp_publish": (ctypes.c_int, [P, S]),
            "fzp_wait": (ctypes.c_int, [P, S, ctypes.c_int64, ctypes.POINTER(_CResult)]),
            "fzp_abort": (ctypes.c_int, [P, S]),
            "fzp_snapshot_free": (None, [P, S]),
            "fzp_status": (ctypes.c_int, [P, ctypes.c_int64] + [ctypes.POINTER(ctypes.c_int64)] * 4),
            "fzp_close": (None, [P]),
        }
        # GPU-resident snapshots (put_device); optional, so that an older
        # library still serves host snapshots
        opt = {
            "fzp_publish_device": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int,
                                                  ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int,
                                                  ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_void_p,
                                                  ctypes.c_uint64, ctypes.c_void_p, ctypes.POINTER(S)]),
        }
        for name, (res, args) in sig.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        for name, (res, args) in opt.items():
            f = getattr(lib, name, None)
            if f is not None:
                f.restype, f.argtypes = res, args
        _lib = lib
        return lib


def library_version() -> str:
    """Version of the loaded libfzproducer."""
    return _load().fzp_version().decode()


def _ms(seconds: Optional[float], what: str) -> int:
    if seconds is None:
        return -1
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{what}={seconds!r}: expected seconds >= 0 or None")
    return int(seconds * 1000)


_DTYPES = {"f4": _F32, "float32": _F32, "f32": _F32, "f8": _F64, "float64": _F64, "f64": _F64}


def _dtype_code(dtype) -> tuple[int, np.dtype]:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is not None and dt.kind == "f" and dt.itemsize in (4, 8):
        code = _F32 if dt.itemsize == 4 else _F64
    elif isinstance(dtype, str) and dtype in _DTYPES:
        code = _DTYPES[dtype]
    else:
        raise ValueError(f"dtype {dtype!r}: expected float32 ('f4') or float64 ('f8')")
    return code, np.dtype("<f4" if code == _F32 else "<f8")


class Producer:
    """A connection to one sidecar (one NATS connection, its own results).

    Every argument is optional; they are libfzproducer's options
    (fzproducer.h): ``url`` (default nats://127.0.0.1:4222, or the url in
    ``<shm_dir>/.fzsidecar-auth``), ``token``/``user``/``password``/``creds``
    (with none given, the sidecar's credentials file in the shm dir is used),
    ``tls_ca``/``tls_cert``/``tls_key``, ``prefix`` ("fz"), ``shm_dir``
    (/dev/shm/fzsidecar), ``id`` (<hostname>-<pid>), ``policy`` ("block" or
    "fail"), ``block_timeout``, ``connect_timeout``, ``publish_timeout``
    (seconds), ``reuse_segments`` (finished segments kept for later
    snapshots of the same size).
    """

    def __init__(self, url: Optional[str] = None, *, shm_dir: Optional[str] = None, id: Optional[str] = None,
                 prefix: Optional[str] = None, policy: str = "block", block_timeout: float = 60.0,
                 connect_timeout: float = 10.0, publish_timeout: float = 60.0, reuse_segments: int = 0,
                 token: Optional[str] = None, user: Optional[str] = None, password: Optional[str] = None,
                 creds: Optional[str] = None, tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None):
        self._lib = _load()
        self._p = self._lib.fzp_new()
        if not self._p:
            raise MemoryError("fzp_new: out of memory")
        self._snaps: "weakref.WeakSet[Snapshot]" = weakref.WeakSet()
        self._closing = False
        try:
            if isinstance(reuse_segments, bool) or not isinstance(reuse_segments, int):
                raise ValueError(f"reuse_segments={reuse_segments!r}: expected an integer >= 0")
            opts = {"url": url, "shm_dir": shm_dir, "id": id, "prefix": prefix, "policy": policy, "token": token,
                    "user": user, "password": password, "creds": creds, "tls_ca": tls_ca, "tls_cert": tls_cert,
                    "tls_key": tls_key, "reuse_segments": str(reuse_segments),
                    "block_timeout_ms": str(_ms(block_timeout, "block_timeout")),
                    "connect_timeout_ms": str(_ms(connect_timeout, "connect_timeout")),
                    "publish_timeout_ms": str(_ms(publish_timeout, "publish_timeout"))}
            for k, v in opts.items():
                if v is None:
                    continue
                if not isinstance(v, str):
                    raise TypeError(f"{k}={v!r}: expected a string")
                self._check(self._lib.fzp_set(self._p, k.encode(), v.encode()))
            self._check(self._lib.fzp_connect(self._p))
        except BaseException:
            self._lib.fzp_close(self._p)
            self._p = None
            raise

    # -- plumbing -----------------------------------------------------------

    def _handle(self):
        if not self._p or self._closing:
            raise ProducerError(ECLOSED, "closed", "producer is closed")
        return self._p

    def _error(self, rc: int) -> ProducerError:
        code = (self._lib.fzp_errcode(self._p) or b"").decode(errors="replace")
        msg = (self._lib.fzp_errmsg(self._p) or b"").decode(errors="replace")
        return ProducerError(rc, code, msg)

    def _check(self, rc: int) -> None:
        if rc != OK:
            raise self._error(rc)

    # -- API ----------------------------------------------------------------

    @property
    def id(self) -> str:
        """The producer id in use."""
        return self._lib.fzp_id(self._handle()).decode()

    def begin(self, run: str, var: str, step: int, shape: Sequence[int], dtype="f4", *, mode: str = "rel",
              bound: float = 1e-3, fill: Optional[float] = None) -> "Snapshot":
        """Admits a snapshot and creates its segment; ``Snapshot.array`` is
        a C-ordered numpy view of it of the given shape and dtype (float32 or
        float64) to fill in place. Raises ProducerError (``budget_full``,
        ``too_large``, ``unavailable``, ``invalid``, ``system``, …)."""
        p = self._handle()
        code, npdt = _dtype_code(dtype)
        if mode not in ("abs", "rel"):
            raise ValueError(f"mode {mode!r}: expected 'abs' or 'rel'")
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"step {step!r}: expected an integer 0 .. 999999999999")
        shape = tuple(shape) if not isinstance(shape, (int, np.integer)) else (shape,)
        if not 1 <= len(shape) <= _MAX_DIMS:
            raise ValueError(f"shape {shape!r}: expected 1..{_MAX_DIMS} extents")
        for n in shape:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                raise ValueError(f"shape {shape!r}: expected non-negative integers")
        if not isinstance(run, str) or not isinstance(var, str):
            raise TypeError("run and var must be strings")
        dims = (ctypes.c_uint64 * len(shape))(*[int(n) for n in shape])
        fillp = ctypes.byref(ctypes.c_double(float(fill))) if fill is not None else None
        snap = ctypes.c_void_p()
        data = ctypes.c_void_p()
        rc = self._lib.fzp_begin(p, run.encode(), var.encode(), int(step), code, len(shape), dims,
                                 _ABS if mode == "abs" else _REL, float(bound), fillp, ctypes.byref(snap),
                                 ctypes.byref(data))
        self._check(rc)
        s = Snapshot(self, snap.value, data.value, shape, npdt, run, var, int(step))
        self._snaps.add(s)
        return s

    def put(self, run: str, var: str, step: int, array, *, mode: str = "rel", bound: float = 1e-3,
            fill: Optional[float] = None) -> "Snapshot":
        """Copies an existing array (float32/float64, any layout; stored in C
        order) into a new segment and publishes it. Returns the published
        Snapshot: ``wait()`` for its result."""
        if hasattr(array, "__cuda_array_interface__"):
            return self.put_device(run, var, step, array, mode=mode, bound=bound, fill=fill)
        a = np.asarray(array)
        s = self.begin(run, var, step, a.shape, a.dtype, mode=mode, bound=bound, fill=fill)
        try:
            if a.size:
                s.array[...] = a
            s.publish()
        except BaseException:
            s.free()
            raise
        return s

    def put_device(self, run: str, var: str, step: int, array, *, mode: str = "rel", bound: float = 1e-3,
                   fill: Optional[float] = None, stream=None) -> "Snapshot":
        """Publishes a C-contiguous float32/float64 array in this process's
        GPU memory (any object with ``__cuda_array_interface__``: CuPy
        arrays, PyTorch CUDA tensors, Numba device arrays) without copying it
        to the host: a sidecar on the same GPU (``fzsidecar serve --backend
        gpu``) compresses it in place. The sidecar reads it after the work
        queued on ``stream`` (a CUDA stream handle as an int, or an object
        with ``.ptr`` or ``.cuda_stream``; default: the interface's own
        ``stream``, else the legacy default stream). Do not modify the array
        until ``wait()`` has returned; the snapshot keeps a reference to it.
        Raises ProducerError ``device_unsupported`` when the sidecar does
        not read GPU memory."""
        p = self._handle()
        if getattr(self._lib, "fzp_publish_device", None) is None:
            raise ProducerError(ESYS, "system", "this libfzproducer predates fzp_publish_device: rebuild it")
        cai = array.__cuda_array_interface__
        shape = tuple(int(n) for n in cai["shape"])
        typestr = cai["typestr"]
        if typestr not in ("<f4", "<f8"):
            raise ValueError(f"device array of type {typestr!r}: expected float32 ('<f4') or float64 ('<f8')")
        npdt = np.dtype(typestr)
        strides = cai.get("strides")
        if strides is not None:
            want, acc = [], npdt.itemsize
            for n in reversed(shape):
                want.append(acc)
                acc *= n
            if tuple(s for s, n in zip(strides, shape) if n > 1) != tuple(s for s, n in zip(reversed(want), shape) if n > 1):
                raise ValueError(f"device array with strides {strides}: expected a C-contiguous array (use .copy() / .contiguous())")
        if not shape or len(shape) > _MAX_DIMS:
            raise ValueError(f"shape {shape!r}: expected 1..{_MAX_DIMS} extents")
        ptr = int(cai["data"][0])
        if stream is None:
            stream = cai.get("stream")  # None: no synchronisation asked; 1: legacy; 2: per-thread; else a stream
        if stream is not None and not isinstance(stream, int):
            stream = int(getattr(stream, "ptr", None) or getattr(stream, "cuda_stream", None) or 0)
        code, _ = _dtype_code(npdt)
        if mode not in ("abs", "rel"):
            raise ValueError(f"mode {mode!r}: expected 'abs' or 'rel'")
        nbytes = int(np.prod(shape, dtype=np.uint64)) * npdt.itemsize
        dims = (ctypes.c_uint64 * len(shape))(*shape)
        fillp = ctypes.byref(ctypes.c_double(float(fill))) if fill is not None else None
        snap = ctypes.c_void_p()
        rc = self._lib.fzp_publish_device(p, run.encode(), var.encode(), int(step), code, len(shape), dims,
                                          _ABS if mode == "abs" else _REL, float(bound), fillp, ptr, nbytes,
                                          stream or None, ctypes.byref(snap))
        self._check(rc)
        s = Snapshot(self, snap.value, None, shape, npdt, run, var, int(step))
        s._device = array  # keeps the memory alive until the snapshot is freed
        s._published = True
        self._snaps.add(s)
        return s

    def status(self, timeout: float = 5.0) -> dict:
        """The sidecar's load: budget_bytes, used_bytes, holds, in_flight."""
        p = self._handle()
        vals = [ctypes.c_int64() for _ in range(4)]
        self._check(self._lib.fzp_status(p, _ms(timeout, "timeout"), *[ctypes.byref(v) for v in vals]))
        return dict(zip(("budget_bytes", "used_bytes", "holds", "in_flight"), (v.value for v in vals)))

    def close(self) -> None:
        """Frees every snapshot and closes the connection. Idempotent. While
        arrays from ``Snapshot.array`` are still referenced, their snapshots
        (and with them the connection) are released only when the last of
        those arrays is gone, so that no array ever points at unmapped
        memory; the producer accepts no calls from now on."""
        if not self._p or self._closing:
            return
        self._closing = True
        for s in list(self._snaps):
            s.free()
        self._finish_close()

    def _finish_close(self):
        if self._p and self._closing and not any(s._h is not None for s in list(self._snaps)):
            self._lib.fzp_close(self._p)
            self._p = None

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _Keeper:
    """Tied to the ctypes buffer under a snapshot's arrays (every numpy view
    derived from them keeps that buffer alive), it keeps the snapshot alive,
    and its death tells the snapshot that no array can reach the mapping."""
    __slots__ = ("snap", "__weakref__")

    def __init__(self, snap):
        self.snap = snap


def _keeper_gone(_ref, wsnap):
    s = wsnap()
    if s is not None and s._h is not None and s._freed and not s._arrays_alive():
        s._release()


class Snapshot:
    """One snapshot: fill ``array`` in place, ``publish()``, ``wait()``."""

    def __init__(self, producer: Producer, handle: int, data: Optional[int], shape, dtype: np.dtype, run, var, step):
        self._prod = producer
        self._h = handle
        self.run, self.var, self.step = run, var, step
        self._shape, self._dtype, self._data = tuple(shape), dtype, data
        self._nbytes = int(np.prod(shape, dtype=np.uint64)) * dtype.itemsize
        self._views: list = []    # weak references to the arrays handed out (made read-only at publish)
        self._keepers: list = []  # weak references to their buffers' keepers
        self._published = False
        self._freed = False

    @property
    def array(self) -> np.ndarray:
        """The segment as a numpy array (C order): writing it writes the
        segment. Read-only after publish(). The array keeps the snapshot
        (and its mapping) alive."""
        if self._h is None or self._freed:
            raise ProducerError(ESTATE, "state", "snapshot was freed")
        if getattr(self, "_device", None) is not None:
            raise ProducerError(ESTATE, "state", "a device snapshot has no host array: the field stays on the GPU")
        if self._nbytes == 0 or not self._data:
            a = np.empty(self._shape, self._dtype)
        else:
            buf = (ctypes.c_ubyte * self._nbytes).from_address(self._data)
            keeper = _Keeper(self)
            buf._keeper = keeper  # no cycle: the snapshot keeps only weak references
            self._keepers.append(weakref.ref(keeper, functools.partial(_keeper_gone, wsnap=weakref.ref(self))))
            a = np.frombuffer(buf, dtype=self._dtype).reshape(self._shape)
        if self._published:
            a.flags.writeable = False
        self._views.append(weakref.ref(a))
        return a

    @property
    def msg_id(self) -> str:
        return self._prod._lib.fzp_snapshot_msg_id(self._h).decode() if self._h else ""

    @property
    def reused(self) -> bool:
        """The segment is a reused one: it still holds an earlier snapshot's values."""
        return bool(self._h and self._prod._lib.fzp_snapshot_reused(self._h))

    def _arrays_alive(self) -> bool:
        """Whether any array over the mapping (also one derived from an
        array of ``array``) may still exist."""
        self._views = [r for r in self._views if r() is not None]
        self._keepers = [r for r in self._keepers if r() is not None]
        return bool(self._keepers)

    def _live(self):
        if self._h is None or self._freed:
            raise ProducerError(ESTATE, "state", "snapshot was freed or its producer closed")
        return self._prod._handle()

    def publish(self) -> None:
        """Announces the snapshot (retrying with the same message id while the
        sidecar restarts). The array must not be written afterwards; it is
        made read-only."""
        p = self._live()
        self._prod._check(self._prod._lib.fzp_publish(p, self._h))
        self._published = True
        for ref in self._views:
            a = ref()
            if a is not None:
                a.flags.writeable = False

    def wait(self, timeout: Optional[float] = 60.0) -> Result:
        """Waits for the result (None: no limit). Raises ProducerError with
        the sidecar's code on an error result, and code ``timeout`` (status
        ETIMEOUT; the snapshot is still pending) when none came in time."""
        p = self._live()
        r = _CResult()
        rc = self._prod._lib.fzp_wait(p, self._h, _ms(timeout, "timeout"), ctypes.byref(r))
        if rc == ESIDECAR:
            raise ProducerError(rc, r.error_code.decode(errors="replace"), self._prod._error(rc).message)
        self._prod._check(rc)
        return Result(key=r.key.decode(), step=r.step, raw_bytes=r.raw_bytes, compressed_bytes=r.compressed_bytes,
                      ratio=r.ratio, abs_eb=r.abs_eb, max_abs_err=r.max_abs_err, seconds=r.seconds,
                      msg_id=r.msg_id.decode())

    def poll(self) -> Optional[Result]:
        """The result if it has arrived, else None."""
        try:
            return self.wait(0)
        except ProducerError as e:
            if e.status == ETIMEOUT:
                return None
            raise

    def abort(self) -> None:
        """Gives the admission back and removes the segment (before publish
        only). With arrays from ``array`` still referenced this happens when
        the last of them is gone (see free())."""
        p = self._live()
        if self._published:
            raise ProducerError(ESTATE, "state", "snapshot was already published: free() it instead")
        if self._arrays_alive():
            self.free()  # an unpublished snapshot's free is its abort
            return
        self._prod._check(self._prod._lib.fzp_abort(p, self._h))
        self._h = None
        self._prod._snaps.discard(self)

    def free(self) -> None:
        """Releases the snapshot: its segment is reused or removed (an
        unpublished one's admission is given back). Otherwise this happens
        when it is garbage collected. While arrays from ``array`` are still
        referenced, the release waits until the last of them is gone (they
        keep the snapshot alive), so an array never points at unmapped
        memory; the snapshot accepts no calls from now on either way."""
        if self._h is None:
            return
        self._freed = True
        if not self._arrays_alive():
            self._release()

    def _release(self):
        h, self._h = self._h, None
        prod = self._prod
        if prod._p:
            prod._lib.fzp_snapshot_free(prod._p, h)
        prod._snaps.discard(self)
        prod._finish_close()

    def __del__(self):
        try:
            if self._h is not None:
                self._release()
        except Exception:
            pass
