"""``care serve``: the search service over an index folder from ``care index build``."""

from __future__ import annotations

from pathlib import Path

import typer

from care.serve.server import MAX_PORT


def serve(
    index: Path = typer.Option(..., "--index", "-i", help="Index folder from 'care index build'."),
    model: str | None = typer.Option(None, "--model", "-m", help="Model spec (default: the index's); only the query route loads."),
    onnx: Path | None = typer.Option(None, "--onnx", help="ONNX export folder ('care export-onnx') for the query encoder."),
    int8: bool = typer.Option(False, "--int8", help="With --onnx: run the int8 quantised model."),
    document_model: str | None = typer.Option(None, "--document-model", help="Also load this spec's document side (/embed side=document)."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port", min=0, max=MAX_PORT,
                             help="TCP port (0 = any free port; the one bound is printed)."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Require the key held in this environment variable."),
    config_file: Path | None = typer.Option(None, "--config", help="JSON file of ServeConfig limits (max_k, max_query_chars, ...)."),
    device: str | None = typer.Option(None, "--device"),
    threads: int = typer.Option(0, "--threads", help="torch / onnxruntime threads (0 = library default)."),
    cors_origins: list[str] | None = typer.Option(
        None, "--cors-origin", help="Let pages from this origin (https://app.example.org; '*' = any) call the API "
                                    "from a browser; repeat for several. Default: same origin only."),
    verify: str = typer.Option(
        "full", "--verify",
        help="Check the index folder before serving: full = every file's size and sha256 against manifest.json "
             "(about 0.7 s per GiB, docs/serve.md) + SQLite quick_check + stored vector norms; quick = the same "
             "without sha256; off = none of these."),
    access_log: bool = typer.Option(False, "--access-log/--no-access-log",
                                    help="Log every request (uvicorn's access log; costs CPU per request; "
                                         "/metrics counts requests either way)."),
) -> None:
    """Serve /search, /embed, /v1/embeddings, /v1/models, /health, /metrics and a search page at /."""
    import dataclasses

    from care.serve.app import create_app
    from care.serve.config import ServeConfig
    from care.serve.engine import load_engine
    from care.serve.server import bind_socket, bound_url, run_foreground

    if threads:
        import torch

        torch.set_num_threads(threads)
    sock = bind_socket(host, port)  # first: a port in use stops the command before the model loads
    config = ServeConfig.load(config_file) if config_file else ServeConfig()
    if api_key_env:
        config = dataclasses.replace(config, api_key_env=api_key_env)
    if cors_origins:
        config = dataclasses.replace(config, cors_origins=tuple(cors_origins))
    engine = load_engine(index, model, config=config, onnx_dir=onnx, int8=int8, document_model=document_model,
                         device=device, onnx_threads=threads, verify=verify)
    app = create_app(engine)
    typer.echo(f"serving {index} on {bound_url(sock)} (OpenAPI schema at /openapi.json)")
    run_foreground(app, sock, log_level="info", access_log=access_log)


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``care`` command."""
    app.command("serve")(serve)
