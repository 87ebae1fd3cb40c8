"""Fixtures of the Python tests. python/python_test.go (go test ./python/)
runs them against real `fzsidecar` processes and sets:

  FZ_TEST_FZSIDECAR     the fzsidecar binary (CLI parity checks)
  FZ_TEST_SERVE_STORE   a store written by `fzsidecar serve` (simulate + publish)
  FZ_TEST_SERVE_RUN     its run
  FZ_TEST_SERVE_V2_STORE  a store written by `fzsidecar serve --format-version 2` (simulate)
  FZ_TEST_SERVE_V2_RUN    its run
  FZ_TEST_DEMO_STORE    a store written by `fzsidecar demo`
  FZ_TEST_DEMO_RUN      its run

A test whose variable is missing is skipped with a message saying so.
"""

import os

import pytest


def _env(name):
    v = os.environ.get(name)
    if not v:
        pytest.skip(f"{name} not set: run these tests through `go test ./python/`")
    return v


@pytest.fixture
def fzsidecar_bin():
    return _env("FZ_TEST_FZSIDECAR")


@pytest.fixture
def serve_store():
    return _env("FZ_TEST_SERVE_STORE"), _env("FZ_TEST_SERVE_RUN")


@pytest.fixture
def serve_v2_store():
    return _env("FZ_TEST_SERVE_V2_STORE"), _env("FZ_TEST_SERVE_V2_RUN")


@pytest.fixture
def demo_store():
    return _env("FZ_TEST_DEMO_STORE"), _env("FZ_TEST_DEMO_RUN")
