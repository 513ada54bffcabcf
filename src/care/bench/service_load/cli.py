"""``care bench service-load``: ``care serve`` against the bare encode + search + lookup loop, measured in one run
(:mod:`care.bench.service_load.measure`), written as a ``service_load`` record with its markdown."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from care.bench.service_load.config import DEFAULT_CLIENTS, VARIANTS, ServiceLoadConfig

logger = logging.getLogger(__name__)


def service_load(
    index: Path = typer.Option(..., "--index", "-i", help="Index folder ('care index build') the services and the bare loop search."),
    queries: Path = typer.Option(..., "--queries", "-q", help="Queries JSONL (BEIR queries or {\"text\": ...} rows)."),
    model: str | None = typer.Option(None, "--model", "-m", help="Query encoder spec (static:FOLDER, a folder, ...); default: the index's."),
    onnx: Path | None = typer.Option(None, "--onnx", help="Serve this ONNX export instead ('care export-onnx')."),
    int8: bool = typer.Option(False, "--int8", help="With --onnx: the int8 model."),
    threads: int = typer.Option(1, "--threads", help="Encoder and FAISS threads of the services and the bare loop."),
    variants: list[str] = typer.Option(["lean", "before"], "--variant",
                                       help=f"Service versions side by side (repeat): {', '.join(VARIANTS)}; the first is the one rated."),
    url: str | None = typer.Option(None, "--url", help="Measure this running service instead of spawning (it must serve --index)."),
    n_queries: int = typer.Option(400, "--n-queries", help="Queries used (the file's first)."),
    k: int = typer.Option(10, "--k", help="Hits per request."),
    clients: list[int] = typer.Option(list(DEFAULT_CLIENTS), "--clients", help="Concurrent clients per level (repeat)."),
    seconds: float = typer.Option(10.0, "--seconds", help="Seconds per load level and variant."),
    ceiling_seconds: float = typer.Option(10.0, "--ceiling-seconds", help="Seconds per batch size of the bare loop's ceiling."),
    max_calls: int = typer.Option(2000, "--max-calls", help="Most timed calls of each call in the one-client timing."),
    min_calls: int = typer.Option(300, "--min-calls", help="Fewest timed calls of each call in the one-client timing."),
    verify: str = typer.Option("quick", "--verify", help="The services' start-up check of the index: full, quick or off."),
    name: str = typer.Option("service_load", "--name", help="Record name: benchmarks/results/service_load/<name>.json."),
    results: Path | None = typer.Option(None, "--results", help="Results folder (default: the checkout's benchmarks/results)."),
    work: Path = typer.Option(Path("runs/service_load"), "--work", help="Folder for the services' configs and logs."),
    allow_dirty: bool = typer.Option(False, "--allow-dirty", help="Record even with uncommitted changes (the diff's hash is kept)."),
) -> None:
    """Measure `care serve` over HTTP against the bare loop: one client interleaved, and a throughput curve against
    the bare loop's ceiling; writes a service_load record and its markdown."""
    from care.bench.record import pin_commit
    from care.bench.reports.paths import RESULTS
    from care.bench.service_load.report import markdown, write_report
    from care.bench.service_load.runner import run_service_load

    config = ServiceLoadConfig(index=str(index), model=model, onnx=str(onnx) if onnx else None, int8=int8, threads=threads,
                               variants=tuple(variants), url=url, queries=str(queries), n_queries=n_queries, k=k,  # type: ignore[arg-type]
                               clients=tuple(clients), seconds=seconds, ceiling_seconds=ceiling_seconds,
                               min_calls=min_calls, max_calls=max_calls, verify=verify)  # type: ignore[arg-type]
    results = results or RESULTS
    pin_commit(results, allow_dirty=allow_dirty, where="care bench service-load")
    record = run_service_load(config, name, work)
    path = write_report(record, results)
    typer.echo(markdown(record))
    typer.echo(f"wrote {path}")


def register(bench_app: typer.Typer) -> None:
    """Add ``service-load`` to ``care bench``."""
    bench_app.command("service-load")(service_load)
