"""``care model inspect``: load a model spec, print what it resolved to, optionally score a few texts.

A quick check before a long benchmark or indexing run: does the spec load, what width and
fingerprint does it have, and does it rank an obvious document first? The command sits in the
``care model`` group (:mod:`care.models.cli` adds it there); ``care inspect-model``, its old name,
still runs it, hidden from the help, and logs where it moved.
"""

from __future__ import annotations

import functools
import logging

import typer

from care.errors import CareError

logger = logging.getLogger(__name__)

#: The command's old top-level name, kept as a hidden alias, and its home.
OLD_NAME = "inspect-model"
NEW_NAME = "care model inspect"


def parse_option_flags(flags: list[str]) -> dict[str, str]:
    """``["pooling=cls", "max_length=512"]`` -> ``{"pooling": "cls", "max_length": "512"}``."""
    options: dict[str, str] = {}
    for flag in flags:
        key, separator, value = flag.partition("=")
        if not separator or not key.strip():
            raise CareError(f"--option expects key=value; got {flag!r}")
        options[key.strip()] = value
    return options


def inspect_model(
    spec: str = typer.Argument(..., help="Model spec: bm25, bm25:char, e5, openai:MODEL, a folder / Hub id, asym:Q|D, or a .yaml/.json file."),
    option: list[str] | None = typer.Option(None, "--option", "-O", help="Extra spec option key=value; repeatable."),
    device: str | None = typer.Option(None, "--device", help="Device for neural models (cpu, cuda, ...)."),
    query: list[str] | None = typer.Option(None, "--query", "-q", help="A query to score against the documents; repeatable."),
    document: list[str] | None = typer.Option(None, "--document", "-d", help="A document to score; repeatable."),
    instruction: str | None = typer.Option(None, "--instruction", help="Task instruction for the queries (dense models)."),
) -> None:
    """Load SPEC and print its type, width and fingerprint; with --query/--document, print their scores."""
    from care.encoders.base import Encoder
    from care.encoders.registry import load_model

    if bool(query) != bool(document):  # one without the other used to print no table and no word why
        given, missing = ("--query", "--document") if query else ("--document", "--query")
        raise CareError(f"{given} needs at least one {missing} to score against; give both, or neither to only "
                        "print the model's type, width and fingerprint")
    model = load_model(spec, device=device, options=parse_option_flags(option or []))
    dense = isinstance(model, Encoder)
    typer.echo(f"spec:        {spec}")
    typer.echo(f"type:        {type(model).__name__}")
    typer.echo(f"name:        {model.name}")
    if dense:
        typer.echo(f"dim:         {model.dim}")
    typer.echo(f"fingerprint: {model.fingerprint}")
    if not query or not document:
        return
    if dense:
        scores = model.encode_queries(query, instruction=instruction) @ model.encode_documents(document).T
        rows = [list(map(float, row)) for row in scores]
    else:
        rows = [list(map(float, model.score(q, document))) for q in query]
    typer.echo("")
    typer.echo("| query | " + " | ".join(f"doc {i + 1}" for i in range(len(document))) + " |")
    typer.echo("|---|" + "---|" * len(document))
    for text, row in zip(query, rows):
        typer.echo(f"| {table_cell(text)} | " + " | ".join(f"{score:.4f}" for score in row) + " |")


def table_cell(text: str) -> str:
    """``text`` as one Markdown table cell: a ``|`` escaped and line breaks shown as spaces, so a query that
    holds them keeps its row."""
    return " ".join(text.split("\n")).replace("\r", " ").replace("|", "\\|")


@functools.wraps(inspect_model)
def moved_inspect_model(*args, **kwargs) -> None:
    """``care inspect-model``: :func:`inspect_model` under its old name, after a log line saying where it moved."""
    logger.warning("`care %s` moved to `%s` (same arguments); the old name still works for now", OLD_NAME, NEW_NAME)
    inspect_model(*args, **kwargs)


def register(app: typer.Typer) -> None:
    """Add the hidden alias ``care inspect-model`` to the top-level app (the command itself: ``care model inspect``)."""
    app.command(OLD_NAME, hidden=True)(moved_inspect_model)
