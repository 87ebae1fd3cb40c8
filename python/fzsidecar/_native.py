"""Finding and loading the native libraries of this package.

Lookup order for a library (e.g. libfz.so): a copy already loaded into this
process (by an HDF5 filter plugin, say), the environment variable that names
its path (FZ_LIBFZ), the package's own ``_lib/`` directory (where ``make
python`` puts it), then ``build/lib/`` of the repository this package sits in
(a source checkout after ``make libfz``).

Reusing a loaded copy matters for libfz: it carries a Go runtime, and Go does
not support two in one process. For the same reason the library is loaded
with RTLD_GLOBAL, so that native code loaded later can find it with
dlsym(RTLD_DEFAULT, ...) instead of loading a second copy.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
from typing import Optional

_here = pathlib.Path(__file__).resolve().parent


def candidates(env: str, filename: str) -> list[pathlib.Path]:
    """The paths tried for a library, in order."""
    out = []
    if os.environ.get(env):
        out.append(pathlib.Path(os.environ[env]))
    out.append(_here / "_lib" / filename)
    out.append(_here.parent.parent / "build" / "lib" / filename)
    return out


def already_loaded(filename: str) -> Optional[str]:
    """The path of a library of this file name mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if path.endswith("/" + filename) and os.path.exists(path):
                    return path
    except OSError:
        pass
    return None


def load(env: str, filename: str, make_target: str) -> ctypes.CDLL:
    """Load a library: a copy already in the process, else the first
    candidate that exists.

    Raises OSError naming every path tried and how to build the library.
    """
    loaded = already_loaded(filename)
    if loaded:
        return ctypes.CDLL(loaded, mode=ctypes.RTLD_GLOBAL)
    tried = []
    for p in candidates(env, filename):
        if env in os.environ and p == pathlib.Path(os.environ[env]) and not p.exists():
            raise OSError(f"{env}={os.environ[env]}: no such file (unset it to use the bundled {filename})")
        if p.exists():
            return ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL)
        tried.append(str(p))
    raise OSError(
        f"{filename} not found (tried {', '.join(tried)}): run `make {make_target}` in the fzsidecar "
        f"repository, or set {env} to its path"
    )
