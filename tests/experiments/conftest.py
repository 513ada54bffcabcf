"""The experiments' tests use the harness tests' tiny task folder and isolated cache (``tests/bench/conftest.py``)."""

from __future__ import annotations

from tests.bench.conftest import _isolated_cache, retrieval_folder  # noqa: F401 - fixtures, found by name

