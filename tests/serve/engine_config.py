"""A search engine with other service limits, for the serve tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from care.serve.engine import SearchEngine


def with_config(engine: SearchEngine, **changes: Any) -> SearchEngine:
    """A :class:`~care.serve.engine.SearchEngine` over ``engine``'s index and encoder with ``changes`` made
    to its :class:`~care.serve.config.ServeConfig` (e.g. ``max_wait_ms=50.0``); nothing is loaded again."""
    return SearchEngine(engine.bundle, engine.query_encoder, dataclasses.replace(engine.config, **changes))
