"""``care doctor``: check the environment and print what is missing and how to install it."""

from __future__ import annotations

from pathlib import Path

import typer

#: Exit status when a core requirement is missing (optional extras only warn, exit 0).
EXIT_CORE_MISSING = 1


def doctor(
    json_output: bool = typer.Option(False, "--json", help="Print the checks as JSON (for scripts)."),
    run_dir: Path = typer.Option(Path("runs"), "--run-dir", help="Folder runs will write to (checked for write access and space)."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Embedding cache folder (default $CARE_CACHE_DIR or ~/.cache/care/embeddings)."),
) -> None:
    """Check Python, torch / GPUs, faiss, optional extras, folders, disk and env vars; exit 1 if the core is broken."""
    from rich.console import Console

    from care.doctor.report import render_table, summary_line, to_json
    from care.doctor.result import core_ok
    from care.doctor.runner import run_checks

    results = run_checks(run_dir=run_dir, cache_dir=cache_dir)
    if json_output:
        typer.echo(to_json(results))
    else:
        console = Console()
        console.print(render_table(results))
        console.print(summary_line(results))
    if not core_ok(results):
        raise typer.Exit(EXIT_CORE_MISSING)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
