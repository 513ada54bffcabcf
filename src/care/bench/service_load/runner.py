"""One ``care bench service-load`` run: load the bare loop's engine and the queries, start (or reach) the services,
measure (:func:`care.bench.service_load.measure.run_measurement`), and build the record."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from care.bench.record import BenchmarkRecord, portable_path
from care.bench.service_load.config import ServiceLoadConfig
from care.errors import CareError

logger = logging.getLogger(__name__)


def load_query_texts(path: str | Path, n: int) -> list[str]:
    """The first ``n`` query texts of a queries JSONL (BEIR ``{"_id", "text"}`` or ``{"query": ...}`` rows)."""
    from care.data.retrieval import load_queries

    texts = list(load_queries(Path(path)).values())[:n]
    if not texts:
        raise CareError(f"{path}: no queries; give a JSONL file of queries (--queries)")
    return texts


def load_bare_engine(config: ServiceLoadConfig) -> Any:
    """The engine the bare loop times: the same index, encoder and threads the services load."""
    import faiss

    from care.serve.config import ServeConfig
    from care.serve.engine import load_engine

    faiss.omp_set_num_threads(config.threads)
    if not config.onnx:
        import torch

        torch.set_num_threads(config.threads)
    return load_engine(config.index, config.model, config=ServeConfig(), onnx_dir=config.onnx, int8=config.int8,
                       onnx_threads=config.threads, verify=config.verify)


def setup_description(config: ServiceLoadConfig, engine: Any) -> dict[str, Any]:
    """What the record says about the encoder and the index (paths made portable)."""
    manifest = engine.bundle.manifest
    encoder = config.onnx and f"ONNX {'int8' if config.int8 else 'fp32'} {portable_path(config.onnx)}"
    return {"encoder": encoder or portable_path(config.model or manifest.model), "query_encoder": engine.query_encoder.name,
            "index_description": f"{manifest.n_docs:,} documents, {manifest.dim}-d, {manifest.index}",
            "index": portable_path(config.index), "queries": portable_path(config.queries or "")}


def run_service_load(config: ServiceLoadConfig, name: str, work: Path) -> BenchmarkRecord:
    """Measure ``config``'s services against the bare loop; the record (not yet written)."""
    from care.bench.service_load.measure import run_measurement
    from care.bench.service_load.report import build_record
    from care.bench.service_load.services import RunningService, SpawnedService

    if config.queries is None:
        raise CareError("service-load: give the queries file (--queries)")
    queries = load_query_texts(config.queries, config.n_queries)
    engine = load_bare_engine(config)
    services: dict[str, Any] = {}
    try:
        if config.url:
            services["running"] = RunningService(config.url)
        for variant in () if config.url else config.variants:  # all start at once; each is stopped below
            services[variant] = SpawnedService(config, variant, work)
        result = run_measurement(engine, services, queries, config)
    finally:
        for service in services.values():
            service.__exit__(None, None, None)
    return build_record(name, config, result, setup_description(config, engine))
