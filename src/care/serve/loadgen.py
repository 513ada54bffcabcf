"""A bounded load generator: N concurrent clients send ``/search`` requests for a fixed time, then stop.

Every request is accounted for: a response (by status code) or a client-side error (connection
refused, timeout: a *dropped* request). Latencies are measured per request on the client.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Sequence
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
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    latencies: list[float] = []
    status: Counter = Counter()
    errors: list[str] = []
    cycle = itertools.cycle(queries)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits, timeout=REQUEST_TIMEOUT_S) as client:
        started = time.perf_counter()
        deadline = started + duration_s
        await asyncio.gather(*(_client(client, "/search", cycle, k, deadline, latencies, status, errors) for _ in range(clients)))
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
    """Synchronous wrapper of :func:`run_load_async` (its own event loop)."""
    return asyncio.run(run_load_async(base_url, queries, clients=clients, duration_s=duration_s, k=k, api_key=api_key))
