"""Finding and loading the native libraries of this package.

Lookup order for a library (e.g. libfz.so): the environment variable that
names its path (FZ_LIBFZ), the package's own ``_lib/`` directory (where
``make python`` puts it), then ``build/lib/`` of the repository this package
sits in (a source checkout after ``make libfz``).
"""

from __future__ import annotations

import ctypes
import os
import pathlib

_here = pathlib.Path(__file__).resolve().parent


def candidates(env: str, filename: str) -> list[pathlib.Path]:
    """The paths tried for a library, in order."""
    out = []
    if os.environ.get(env):
        out.append(pathlib.Path(os.environ[env]))
    out.append(_here / "_lib" / filename)
    out.append(_here.parent.parent / "build" / "lib" / filename)
    return out


def load(env: str, filename: str, make_target: str) -> ctypes.CDLL:
    """Load a library from the first candidate that exists.

    Raises OSError naming every path tried and how to build the library.
    """
    tried = []
    for p in candidates(env, filename):
        if env in os.environ and p == pathlib.Path(os.environ[env]) and not p.exists():
            raise OSError(f"{env}={os.environ[env]}: no such file (unset it to use the bundled {filename})")
        if p.exists():
            return ctypes.CDLL(str(p))
        tried.append(str(p))
    raise OSError(
        f"{filename} not found (tried {', '.join(tried)}): run `make {make_target}` in the fzsidecar "
        f"repository, or set {env} to its path"
    )
