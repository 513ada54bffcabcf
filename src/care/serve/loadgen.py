"""A bounded load generator: N concurrent clients send ``/search`` requests for a fixed time, then stop.

Every request is accounted for: a response (by status code) or a client-side error (connection
refused, timeout: a *dropped* request). Latencies are measured per request on the client.

:func:`run_mixed_load` mixes hostile requests (:func:`hostile_kinds`: lone surrogates, NUL,
invisible text, bodies that are not UTF-8 or cut-off JSON, bodies over the size limit, unbounded
fields, no API key) among normal ones, and reports the outcome of each kind separately, so that
"no bad request hurts a good one" is a number: failures among the valid requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from care.errors import CareError

#: Seconds before a single request counts as dropped.
REQUEST_TIMEOUT_S = 30.0


@dataclass
class LoadReport:
    """What a load run measured."""

    clients: int
    duration_s: float
    requests: int
    qps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    status: dict[str, int] = field(default_factory=dict)
    dropped: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def server_errors(self) -> int:
        return sum(n for code, n in self.status.items() if code.startswith("5"))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "server_errors": self.server_errors}


async def _client(client: Any, url: str, queries: Any, k: int, deadline: float, latencies: list[float],
                  status: Counter, errors: list[str]) -> None:
    while time.perf_counter() < deadline:
        query = next(queries)
        started = time.perf_counter()
        try:
            response = await client.post(url, json={"query": query, "k": k})
            status[str(response.status_code)] += 1
        except Exception as exc:  # noqa: BLE001 - every failure is a dropped request
            status["dropped"] += 1
            if len(errors) < 10:
                errors.append(f"{type(exc).__name__}: {exc}")
            continue
        latencies.append(time.perf_counter() - started)


async def run_load_async(base_url: str, queries: Sequence[str], *, clients: int, duration_s: float, k: int = 10,
                         api_key: str | None = None) -> LoadReport:
    """Run ``clients`` concurrent loops of ``POST /search`` for ``duration_s`` seconds."""
    import httpx

    if not queries:
        raise CareError("the load generator needs at least one query")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    latencies: list[float] = []
    status: Counter = Counter()
    errors: list[str] = []
    cycle = itertools.cycle(queries)
    async with contextlib.AsyncExitStack() as stack:
        # one connection per simulated client, as N real clients have: one shared pool of N connections
        # costs the generator O(N) work per request, which on 2 cores it takes from the service it measures
        sessions = [await stack.enter_async_context(httpx.AsyncClient(
            base_url=base_url, headers=headers, limits=httpx.Limits(max_connections=1), timeout=REQUEST_TIMEOUT_S))
            for _ in range(clients)]
        started = time.perf_counter()
        deadline = started + duration_s
        await asyncio.gather(*(_client(session, "/search", cycle, k, deadline, latencies, status, errors)
                               for session in sessions))
        elapsed = time.perf_counter() - started
    dropped = status.pop("dropped", 0)
    lat_ms = np.asarray(latencies) * 1000 if latencies else np.asarray([np.nan])
    return LoadReport(
        clients=clients, duration_s=round(elapsed, 3), requests=len(latencies), qps=round(len(latencies) / elapsed, 2),
        p50_ms=round(float(np.percentile(lat_ms, 50)), 3), p90_ms=round(float(np.percentile(lat_ms, 90)), 3),
        p99_ms=round(float(np.percentile(lat_ms, 99)), 3), status=dict(status), dropped=dropped, errors=errors,
    )


def run_load(base_url: str, queries: Sequence[str], *, clients: int, duration_s: float, k: int = 10,
             api_key: str | None = None) -> LoadReport:
    """Synchronous wrapper of :func:`run_load_async` (its own event loop: uvloop's when installed, the lighter one)."""
    return _run(run_load_async(base_url, queries, clients=clients, duration_s=duration_s, k=k, api_key=api_key))


def _run(coroutine: Any) -> Any:
    """``asyncio.run`` on uvloop's event loop when it is installed (it is with ``care-retrieval[serve]``)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


# --------------------------------------------------------------------------- mixed (hostile) load
#: A request to send: path, raw body bytes, extra headers, and whether it should succeed (200).
Built = tuple[str, bytes, dict[str, str]]
JSON_HEADERS = {"content-type": "application/json"}
#: Bytes of a body over any sensible limit (the service's default is 4 MiB).
HUGE_BODY_BYTES = 8 * 1024 * 1024
#: An instruction far over the service's bound (1M characters, as in the report that found it).
HUGE_INSTRUCTION_CHARS = 1_000_000
#: A filter list far over the service's bound, still under the body limit.
LONG_FILTER_VALUES = 100_000


def _json_body(obj: object) -> bytes:
    return json.dumps(obj).encode("ascii")  # ASCII escapes keep lone surrogates as "\\ud800"


@functools.cache
def hostile_kinds() -> dict[str, Callable[[str], Built]]:
    """Hostile request kinds by name; each maps a normal query to ``(path, body, headers)`` (built once)."""
    huge = b'{"query": "' + b"a" * HUGE_BODY_BYTES + b'"}'
    long_instruction = _json_body({"query": "q", "instruction": "x" * HUGE_INSTRUCTION_CHARS})
    long_filter = _json_body({"query": "q", "filters": {"department": ["d"] * LONG_FILTER_VALUES}})
    return {
        "lone_surrogate": lambda q: ("/search", _json_body({"query": q + "\ud800"}), JSON_HEADERS),
        "lone_surrogate_embed": lambda q: ("/embed", _json_body({"inputs": [q, "\udfff" + q]}), JSON_HEADERS),
        "nul": lambda q: ("/search", _json_body({"query": q + "\x00"}), JSON_HEADERS),
        "zero_width_only": lambda q: ("/search", _json_body({"query": "\u200b\u200b\ufeff"}), JSON_HEADERS),
        "bad_utf8": lambda q: ("/search", b'{"query": "' + q.encode("gb18030") + b'\xff"}', JSON_HEADERS),
        "truncated_json": lambda q: ("/search", _json_body({"query": q, "k": 5})[:-7], JSON_HEADERS),
        "huge_body": lambda q: ("/search", huge, JSON_HEADERS),
        "huge_instruction": lambda q: ("/search", long_instruction, JSON_HEADERS),
        "huge_filter_list": lambda q: ("/search", long_filter, JSON_HEADERS),
    }


#: Sent without the API key (when the service has one): the body must not be read.
UNAUTHENTICATED_HUGE = "unauthenticated_huge_body"


@dataclass
class MixedLoadReport:
    """Outcome of a mixed run. ``status[kind][code]`` counts responses (``dropped``: no response)."""

    clients: int
    duration_s: float
    hostile_share: float
    status: dict[str, dict[str, int]]
    valid_requests: int
    valid_failures: int
    valid_qps: float
    valid_p50_ms: float
    valid_p99_ms: float
    hostile_requests: int
    hostile_server_errors: int
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def run_mixed_load_async(base_url: str, queries: Sequence[str], *, clients: int, duration_s: float,
                               hostile_share: float, seed: int = 0, k: int = 10, api_key: str | None = None,
                               kinds_wanted: Sequence[str] | None = None) -> MixedLoadReport:
    """``clients`` loops for ``duration_s`` seconds; each request is hostile with probability
    ``hostile_share`` (a kind drawn from ``kinds_wanted``, default every one of :func:`hostile_kinds`), else a normal ``/search``
    or ``/embed`` that must answer 200. Seeded, so two runs send the same sequence per client."""
    import httpx

    if not queries:
        raise CareError("the load generator needs at least one query")
    kinds = list(kinds_wanted or hostile_kinds()) + ([UNAUTHENTICATED_HUGE] if api_key and kinds_wanted is None else [])
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    status: dict[str, Counter] = {}
    latencies: list[float] = []
    errors: list[str] = []

    def build(rng: random.Random) -> tuple[str, bool, Built]:
        query = rng.choice(queries)
        if rng.random() < hostile_share:
            kind = rng.choice(kinds)
            if kind == UNAUTHENTICATED_HUGE:
                path, body, headers = hostile_kinds()["huge_body"](query)
                return kind, False, (path, body, {**headers, "Authorization": "Bearer wrong"})
            path, body, headers = hostile_kinds()[kind](query)
            return kind, False, (path, body, {**auth, **headers})
        if rng.random() < 0.5:
            return "valid_search", True, ("/search", _json_body({"query": query, "k": k}), {**auth, **JSON_HEADERS})
        return "valid_embed", True, ("/embed", _json_body({"inputs": [query, query[::-1]]}), {**auth, **JSON_HEADERS})

    async def client_loop(client: Any, rng: random.Random, deadline: float) -> None:
        while time.perf_counter() < deadline:
            kind, valid, (path, body, headers) = build(rng)
            counts = status.setdefault(kind, Counter())
            started = time.perf_counter()
            try:
                response = await client.post(path, content=body, headers=headers)
            except Exception as exc:  # noqa: BLE001 - a request without a response is dropped
                counts["dropped"] += 1
                if len(errors) < 10:
                    errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                continue
            counts[str(response.status_code)] += 1
            if valid and response.status_code == 200:
                latencies.append(time.perf_counter() - started)

    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=REQUEST_TIMEOUT_S) as client:
        started = time.perf_counter()
        deadline = started + duration_s
        await asyncio.gather(*(client_loop(client, random.Random(seed * 1_000_003 + i), deadline) for i in range(clients)))
        elapsed = time.perf_counter() - started
    valid = {kind: c for kind, c in status.items() if kind.startswith("valid_")}
    valid_total = sum(sum(c.values()) for c in valid.values())
    valid_failures = sum(n for c in valid.values() for code, n in c.items() if code != "200")
    hostile = {kind: c for kind, c in status.items() if not kind.startswith("valid_")}
    lat_ms = np.asarray(latencies) * 1000 if latencies else np.asarray([np.nan])
    return MixedLoadReport(
        clients=clients, duration_s=round(elapsed, 3), hostile_share=hostile_share,
        status={kind: dict(sorted(c.items())) for kind, c in sorted(status.items())},
        valid_requests=valid_total, valid_failures=valid_failures, valid_qps=round(len(latencies) / elapsed, 2),
        valid_p50_ms=round(float(np.percentile(lat_ms, 50)), 3), valid_p99_ms=round(float(np.percentile(lat_ms, 99)), 3),
        hostile_requests=sum(sum(c.values()) for c in hostile.values()),
        hostile_server_errors=sum(n for c in hostile.values() for code, n in c.items() if code.startswith("5")),
        errors=errors,
    )


def run_mixed_load(base_url: str, queries: Sequence[str], **options: Any) -> MixedLoadReport:
    """Synchronous wrapper of :func:`run_mixed_load_async` (its own event loop)."""
    return _run(run_mixed_load_async(base_url, queries, **options))
