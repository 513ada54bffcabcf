"""Settings of ``care bench service-load`` (a dataclass that round-trips to JSON, like every config).

A *variant* is a named change to the service's :class:`~care.serve.config.ServeConfig`, so that several versions of
the hot path are measured side by side in one run against one bare loop: ``lean`` (the defaults), ``before`` (every
``/search`` body through the pydantic model and a second, stdlib parse: the path before issue 59), ``route``
(``/search`` through FastAPI's route), ``framework`` (``/search``'s layers inside FastAPI's application stack
instead of in front of it: the path before the front door, :mod:`care.serve.front`), ``h11`` (uvicorn's pure-Python HTTP parser), ``no-inline`` (every request
through the micro-batcher's worker thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from care.config import Config
from care.errors import CareError

Variant = Literal["lean", "before", "route", "framework", "h11", "no-inline"]
#: The services' start-up check of the index folder (``care serve --verify``).
VerifyMode = Literal["full", "quick", "off"]
#: ServeConfig fields each variant changes (the first variant listed is the one the record's ratios are of).
VARIANTS: dict[str, dict[str, Any]] = {
    "lean": {},
    "before": {"lean_search": False},
    "route": {"fast_search": False},
    "framework": {"search_in_front": False},
    "h11": {"http_parser": "h11"},
    "no-inline": {"inline_max_items": 0},
}
#: Concurrent clients of the throughput curve (issue 59 asks for 64).
DEFAULT_CLIENTS = (1, 8, 32, 64)
#: Batch sizes of the bare loop's ceiling (its best q/s is the ceiling).
DEFAULT_CEILING_BATCHES = (1, 8, 32)


@dataclass(frozen=True)
class ServiceLoadConfig(Config):
    """What ``care bench service-load`` measures and how long.

    Attributes:
        index: the index folder (``care index build``) both the services and the bare loop search.
        model: the query encoder's spec (``static:FOLDER``, a model folder, ...); None = the index's model.
        onnx / int8: serve this ONNX export instead (``care serve --onnx``), int8 weights with ``int8``.
        threads: encoder and FAISS threads of the services and of the bare loop alike.
        variants: the service versions measured side by side (module docstring); the first is the one the
            record's ``served_over_bare`` and ``throughput_of_ceiling`` are of.
        url: measure this running service (it must serve ``index`` with the same encoder) instead of spawning;
            only one variant is then measured, named ``running``.
        queries: a JSONL file of queries (``{"text": ...}`` or ``{"query": ...}``) or a BEIR queries file.
        n_queries: queries used (the first ones).
        k: hits asked per request.
        clients: concurrent clients at each level of the throughput curve.
        seconds: seconds per level and variant.
        ceiling_seconds: seconds per batch size of the bare loop's ceiling.
        ceiling_batches: batch sizes of the bare loop's ceiling.
        min_calls / max_calls / max_seconds: bounds of the interleaved one-client timing (calls per timed call).
        verify: the services' start-up check of the index folder (``care serve --verify``).
    """

    index: str
    model: str | None = None
    onnx: str | None = None
    int8: bool = False
    threads: int = 1
    variants: tuple[Variant, ...] = ("lean", "before")
    url: str | None = None
    queries: str | None = None
    n_queries: int = 400
    k: int = 10
    clients: tuple[int, ...] = DEFAULT_CLIENTS
    seconds: float = 10.0
    ceiling_seconds: float = 10.0
    ceiling_batches: tuple[int, ...] = DEFAULT_CEILING_BATCHES
    min_calls: int = 300
    max_calls: int = 2000
    max_seconds: float = 240.0
    verify: VerifyMode = "quick"

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", tuple(self.variants))
        object.__setattr__(self, "clients", tuple(self.clients))
        object.__setattr__(self, "ceiling_batches", tuple(self.ceiling_batches))
        if not self.variants:
            raise CareError("service-load: give at least one variant (--variant lean)")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise CareError(f"service-load: unknown variant(s) {unknown}; known: {list(VARIANTS)}")
        for name in ("threads", "n_queries", "k", "min_calls", "max_calls"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"service-load option {name} must be >= 1, got {getattr(self, name)}")
        if not self.clients or min(self.clients) < 1 or not self.ceiling_batches or min(self.ceiling_batches) < 1:
            raise CareError("service-load: clients and ceiling batches must be positive counts")
        if self.verify not in get_args(VerifyMode):
            raise CareError(f"service-load option verify must be one of {list(get_args(VerifyMode))}, got {self.verify!r}")
        for name in ("seconds", "ceiling_seconds", "max_seconds"):
            if not float(getattr(self, name)) > 0:
                raise CareError(f"service-load option {name} must be > 0 seconds, got {getattr(self, name)}")

    @property
    def measured_variants(self) -> tuple[str, ...]:
        """The names the services are recorded under (``running`` for a service given by ``url``)."""
        return ("running",) if self.url else tuple(self.variants)
