"""``care pretrain``: pretrain the query encoder before ``init_query``.

    care pretrain retromae --config configs/pretrain/retromae_tiny.yaml [--set optim.max_steps=100 ...] [--resume]
    care pretrain contrastive --config configs/pretrain/contrastive_tiny.yaml [--set ...] [--resume]
    care pretrain make-pairs --corpus corpus.jsonl --output pairs.jsonl [--mode split|fields]

Multi-GPU: ``torchrun --nproc_per_node N -m care.cli pretrain retromae --config ...``.
"""

from __future__ import annotations

from pathlib import Path

import typer

pretrain_app = typer.Typer(help="Pretrain the query encoder: RetroMAE, unsupervised contrastive.", no_args_is_help=True)

CONFIG_OPTION = typer.Option(..., "--config", "-c", help="Pretraining config (YAML or JSON).")
SET_OPTION = typer.Option([], "--set", help="Override a config field: KEY=VALUE (repeatable).")
RESUME_OPTION = typer.Option(False, "--resume", help="Continue from the latest checkpoint in output_dir.")


def _run(method: str, config: Path, set_: list[str], resume: bool) -> None:
    from care.pretrain.config import load_pretrain_config
    from care.pretrain.trainer import pretrain

    result = pretrain(load_pretrain_config(config, set_, method=method), resume=resume)
    loss = "n/a" if result.final_loss is None else f"{result.final_loss:.4f}"
    typer.echo(f"{result.method}: {result.global_step} steps, {result.records_seen} records, final loss {loss}")
    typer.echo(f"  encoder (use as model.query_model): {result.model}")


@pretrain_app.command("retromae")
def retromae_command(config: Path = CONFIG_OPTION, set_: list[str] = SET_OPTION, resume: bool = RESUME_OPTION) -> None:
    """RetroMAE masked auto-encoding on .txt / .jsonl texts; saves a plain encoder folder."""
    _run("retromae", config, set_, resume)


@pretrain_app.command("contrastive")
def contrastive_command(config: Path = CONFIG_OPTION, set_: list[str] = SET_OPTION,
                        resume: bool = RESUME_OPTION) -> None:
    """In-batch InfoNCE on JSONL text pairs (e.g. title/content); saves a plain encoder folder."""
    _run("contrastive", config, set_, resume)


@pretrain_app.command("make-pairs")
def make_pairs_command(
    inputs: list[Path] = typer.Option(..., "--input", "-i", help="JSONL file(s) to read (repeatable)."),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs JSONL to write ({title, content})."),
    mode: str = typer.Option("split", "--mode", help="split: (first sentence, rest) of one text field; "
                                                     "fields: two existing fields as the pair."),
    text_field: str = typer.Option("text", "--text-field", help="Field split in 'split' mode."),
    fields: list[str] = typer.Option(["query", "positive"], "--field",
                                     help="The two fields of 'fields' mode (give --field twice)."),
    min_chars: int = typer.Option(None, "--min-chars", help="Shortest first sentence / rest kept (split mode)."),
) -> None:
    """Build unsupervised (title, content) pairs from a corpus or a (query, answer) file."""
    from care.pretrain.pairs import DEFAULT_MIN_CHARS, make_pairs

    stats = make_pairs(inputs, output, mode=mode, text_field=text_field, fields=tuple(fields),
                       min_chars=DEFAULT_MIN_CHARS if min_chars is None else min_chars)
    typer.echo(f"wrote {stats['pairs']} pairs to {output} ({stats['skipped']} texts skipped)")


def register(app: typer.Typer) -> None:
    """Add ``care pretrain`` to the main CLI."""
    app.add_typer(pretrain_app, name="pretrain")
