"""The ``care`` command: a thin typer front over the Python API.

Each area (bench, train, curate, ...) owns a ``cli`` module exposing ``register(app)``; this file
only wires them together so that ``care --help`` stays fast (heavy imports happen inside commands).
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path

import typer

from care.data.errors import DataFormatError
from care.errors import CareError

#: What the user can fix: printed as one line, exit status 2 (not a traceback).
USER_ERRORS: tuple[type[BaseException], ...] = (CareError, DataFormatError, FileNotFoundError)

app = typer.Typer(
    name="care",
    help="CMedTEB benchmark harness and the CARE asymmetric retriever for Chinese medical retrieval.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Modules whose ``register(app)`` adds commands; one line per area.
COMMAND_MODULES: tuple[str, ...] = (
    "care.curate.cli",
    "care.bench.cli",
    "care.encoders.cli",
    "care.models.cli",
    "care.train.cli",
    "care.pretrain.cli",
    "care.serve.cli",
    "care.doctor.cli",
    "care.pipeline.cli",
)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Warnings and errors only."),
) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")


def _demo_task_folders() -> list[Path]:
    """The embedded demo benchmark's task folders (``care bench`` without ``--task``)."""
    from care.demo import demo_task_folders

    return demo_task_folders()


#: Keyword arguments of an area's ``register`` (this file composes the areas; they do not import each other).
REGISTER_OPTIONS: dict[str, dict[str, object]] = {"care.bench.cli": {"default_tasks": _demo_task_folders}}

for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app, **REGISTER_OPTIONS.get(_module, {}))


def run_cli(typer_app: typer.Typer) -> None:
    """Run a typer app; print user errors (:data:`USER_ERRORS`) as ``error: ...`` and exit with status 2."""
    try:
        typer_app()
    except USER_ERRORS as exc:
        logging.getLogger(__name__).debug("user error", exc_info=True)
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)


def main() -> None:
    """Console-script entry point; user errors become one clear line and exit code 2."""
    run_cli(app)


if __name__ == "__main__":
    main()
